"""Public checks of stage 3 - attention (slides 4-6, 11-15, 32-38).

Run them with `make check` or `python -m grader check a03_attention`.
Every expected value here can be worked out by hand; the hidden suite adds
random, batched and masked inputs, error handling and a speed check.
"""
import math

import numpy as np

from grader.engine.testing import as_array, assert_close, assert_shape
from grader.i18n import tr


def _pair(result, what):
    assert isinstance(result, (tuple, list)) and len(result) == 2, tr("{what} should return a pair (out, weights)",
                                                                      what=what)
    return result


def test_attention_context_lets_go(student):
    """attention_context for "Let's go": scores, softmax, weighted sum of the encoder states (slides 11-15)"""
    # illustrative 2-D encoder states for "Let's" and "go", and a decoder state whose dot products
    # with them are log 3 and 0, so the softmax weights are exactly 3/4 and 1/4
    encoder_states = np.array([[1.0, 0.0],     # "Let's"
                               [0.0, 1.0]])    # "go"
    decoder_state = np.array([math.log(3.0), 0.0])
    context, weights = _pair(student.attention_context(decoder_state, encoder_states), "attention_context")
    assert_close(weights, [0.75, 0.25], what=tr("attention_context weights"), atol=1e-12,
                 hint=tr("scores = [log 3, 0] (plain dot products, no scaling); softmax gives [3/4, 1/4] (slide "
                         "14)."))
    assert_close(context, [0.75, 0.25], what=tr("attention_context context"), atol=1e-12,
                 hint=tr("context = 0.75 * [1, 0] + 0.25 * [0, 1]: a weighted sum of all encoder states, not the "
                         "best one alone (slides 6, 15)."))


def test_sdpa_hand_example_scaled_by_sqrt_dk(student):
    """scaled_dot_product_attention divides the scores by sqrt(d_k) = 2 for d_k = 4 (slides 5, 34)"""
    Q = np.array([[2.0, 0.0, 0.0, 0.0]])                      # one query, d_k = 4
    K = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # two keys: scores 2 and 0 before scaling
    V = np.array([[1.0, 0.0], [0.0, 1.0]])
    out, w = _pair(student.scaled_dot_product_attention(Q, K, V), "scaled_dot_product_attention")
    e = math.e
    assert_close(w, [[e / (e + 1), 1 / (e + 1)]], what="weights", atol=1e-12,
                 hint=tr("Scores are Q K^T / sqrt(d_k) = [2, 0] / 2 = [1, 0], then softmax."))
    assert_close(out, [[e / (e + 1), 1 / (e + 1)]], what="out", atol=1e-12,
                 hint=tr("out = weights @ V; with V the identity, out equals the weights."))


def test_sdpa_shapes_m_ne_n(student):
    """3 queries, 5 keys, d_k = 4, d_v = 2: out is (3, 2) and weights (3, 5) with rows summing to 1"""
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    out, w = _pair(student.scaled_dot_product_attention(Q, K, V), "scaled_dot_product_attention")
    assert_shape(out, (3, 2), what=tr("out for Q (3, 4), K (5, 4), V (5, 2)"))
    w = assert_shape(w, (3, 5), what=tr("weights for Q (3, 4), K (5, 4)"))
    assert np.allclose(w.sum(axis=-1), 1.0), (
        tr("each query's weights should sum to 1 over the 5 keys, got {sums}: apply the "
           "softmax over the last axis (the keys).", sums=np.round(w.sum(axis=-1), 4)))


def test_sdpa_causal_mask_equal_scores(student):
    """with equal scores and a causal mask, query i spreads its weight evenly over keys 0..i"""
    Q, K = np.zeros((3, 2)), np.zeros((3, 2))
    V = np.array([[3.0], [6.0], [9.0]])
    mask = np.array([[True, False, False], [True, True, False], [True, True, True]])
    out, w = _pair(student.scaled_dot_product_attention(Q, K, V, mask), tr("scaled_dot_product_attention with a mask"))
    assert_close(w, [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]],
                 what=tr("weights with a causal mask"), atol=1e-12,
                 hint=tr("mask True = may attend. Blocked scores become -inf before the softmax, so they get "
                         "weight 0 and the allowed ones still sum to 1."))
    assert_close(out, [[3.0], [4.5], [6.0]], what=tr("out with a causal mask"), atol=1e-12)


def test_sdpa_fully_masked_row(student):
    """a query that may attend to nothing gets zero weights and a zero output, not NaN"""
    Q, K, V = np.ones((2, 2)), np.ones((3, 2)), np.ones((3, 4))
    mask = np.array([[True, True, False], [False, False, False]])
    out, w = _pair(student.scaled_dot_product_attention(Q, K, V, mask), "scaled_dot_product_attention")
    w, out = as_array(w, what="weights"), as_array(out, what="out")
    assert not np.isnan(w).any() and not np.isnan(out).any(), (
        tr("NaN for the fully masked query row: every score is -inf, so the max is -inf and -inf - (-inf) = NaN. "
           "Give such a row zero weights and a zero output."))
    assert_close(w, [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]], what=tr("weights with a fully masked row"), atol=1e-12)
    assert_close(out[1], np.zeros(4), what=tr("out of the fully masked row"), atol=1e-12)


def test_self_attention_shapes_and_rows(student):
    """self_attention: X (4, 6), W_q/W_k (6, 3), W_v (6, 2) give out (4, 2) and weights (4, 4) (slides 32-37)"""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4, 6))
    Wq, Wk, Wv = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    out, w = _pair(student.self_attention(X, Wq, Wk, Wv), "self_attention")
    assert_shape(out, (4, 2), what=tr("self_attention out"))
    w = assert_shape(w, (4, 4), what=tr("self_attention weights"))
    assert np.allclose(w.sum(axis=-1), 1.0), tr("weights rows sum to {sums}, not 1",
                                                sums=np.round(w.sum(axis=-1), 4))
    Qp, Kp = X @ Wq, X @ Wk
    s = Qp @ Kp.T / math.sqrt(3)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    assert_close(w, e / e.sum(axis=-1, keepdims=True), what=tr("self_attention weights"), atol=1e-10,
                 hint=tr("Q = X @ W_q, K = X @ W_k, and the scores are divided by sqrt(d_k) = sqrt(3), the width "
                         "of Q and K (not d_model = 6)."))
