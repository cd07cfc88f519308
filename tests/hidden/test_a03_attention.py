"""Hidden suite of stage 3 - attention (slides 4-6, 11-15, 32-38).

Expected values come from the reference solution, imported here in the trusted
process; the student's module runs in the worker behind `student`.

Tolerance: atol 1e-10, rtol 1e-8. Weights lie in [0, 1] and outputs are
weighted sums of O(1) Values; computing the same thing in another order
(einsum or matmul, scaling Q or the scores, np.where or masked assignment)
changes results by ~1e-15. Every mistake we look for (a wrong scale, the wrong
softmax axis, a mask applied after the softmax, a pick instead of a weighted
sum) changes them by more than 1e-3, so 1e-10 separates both with room to spare.
"""
import numpy as np
import pytest
from hypothesis import strategies as st

from grader.engine import properties, testing
from grader.engine.errors import StudentError
from grader.engine.testing import (
    Axis,
    as_array,
    assert_close,
    assert_matches,
    assert_shape,
    check_function_sizes,
    raises_student,
    reference,
    which_mistake,
)
from grader.i18n import join, tr

ref = reference("a03_attention")
TOL = dict(atol=1e-10, rtol=1e-8)
# CPU time (the worker's, read from outside it, against the reference's here): a Python loop over the queries
# measures 130x the reference, the correct alternatives 2-5x.
SLOWDOWN_LIMIT = 20.0


def rng(case):
    """The inputs of case ``case``: drawn from this submission's stage seed (course secret,
    submission id, stage), so no two students, and no two terms, see the same numbers."""
    return testing.rng(3000 + case)


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _softmax(x, axis=-1):
    """Plain stable softmax for building the wrong answers we recognise (not the reference)."""
    with np.errstate(all="ignore"):
        m = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
        s = np.sum(e, axis=axis, keepdims=True)
        return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


# ---------------------------------------------------------------- recognising mistakes

def _variant_weights(Q, K, mask, scale=None, axis=-1, mask_mode="before"):
    with np.errstate(all="ignore"):
        s = Q @ _swap(K) / (np.sqrt(Q.shape[-1]) if scale is None else scale)
        if mask is not None:
            fill = {"before": -np.inf, "zero": 0.0, "big": -1e9}.get(mask_mode)
            if mask_mode == "inverted":
                s = np.where(mask, -np.inf, s)
            elif fill is not None:
                s = np.where(mask, s, fill)
        w = _softmax(s, axis=axis)
        if mask is not None and mask_mode == "after":
            w = np.where(mask, w, 0.0)
        return w


def weights_diagnosis(w, Q, K, V, mask=None, d_model=None):
    """The known mistakes behind wrong attention weights, and the hint when none of them is it:
    keyword arguments for assert_matches (and which_mistake)."""
    d_k, d_v = Q.shape[-1], V.shape[-1]
    mistakes = {tr("The scores look not divided by sqrt(d_k) at all: divide Q K^T by sqrt(d_k) before the "
                   "softmax (slides 5, 34)."): lambda: _variant_weights(Q, K, mask, scale=1.0)}
    if d_k != 1:  # for d_k = 1, d_k and sqrt(d_k) are the same number
        mistakes[tr("The scores look divided by d_k instead of sqrt(d_k) (slide 34).")] = \
            lambda: _variant_weights(Q, K, mask, scale=float(d_k))
    if d_v != d_k:
        mistakes[tr("The scores look divided by sqrt(d_v) (the Value size) instead of sqrt(d_k), the Query/Key "
                    "size.")] = \
            lambda: _variant_weights(Q, K, mask, scale=np.sqrt(d_v))
    if d_model is not None and d_model != d_k:
        mistakes[tr("The scores look divided by sqrt(d_model) instead of sqrt(d_k): d_k is the width of Q and K "
                    "after the projections W_q, W_k (slide 34).")] = \
            lambda: _variant_weights(Q, K, mask, scale=np.sqrt(d_model))
    mistakes[tr("The scores look transposed (K Q^T instead of Q K^T): row i must hold query i's scores over the "
                "keys.")] = lambda: _softmax(K @ _swap(Q) / np.sqrt(d_k), axis=-1)
    mistakes[tr("The softmax seems to run over the query axis (axis=-2): each query's weights over the keys (the "
                "last axis) must sum to 1 (slide 5).")] = lambda: _variant_weights(Q, K, mask, axis=-2)
    if mask is not None:
        mistakes.update({
            tr("The mask looks inverted: True means the query MAY attend to that key (blocked where False)."):
            lambda: _variant_weights(Q, K, mask, mask_mode="inverted"),
            tr("The mask seems applied after the softmax: blocked weights are zeroed but the rest no longer sum "
               "to 1. Set blocked scores to -inf before the softmax."):
                lambda: _variant_weights(Q, K, mask, mask_mode="after"),
            tr("Blocked scores seem set to 0 instead of -inf, so blocked keys still get weight."):
            lambda: _variant_weights(Q, K, mask, mask_mode="zero"),
            tr("A fully masked row got uniform weights (blocked scores set to a large negative number instead of "
               "-inf?). A fully masked query row must get zero weights and a zero output."):
            lambda: _variant_weights(Q, K, mask, mask_mode="big"),
        })
    default = (tr("weights = softmax(Q K^T / sqrt(d_k)) over the keys (last axis), blocked scores set to -inf "
                  "first (slides 5, 34-35)."))
    try:
        arr = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError):
        return dict(mistakes=mistakes, hint=default)
    if np.isnan(arr).any():
        nan_rows = np.isnan(arr).any(axis=-1)
        try:
            dead = None if mask is None else ~np.broadcast_to(mask, arr.shape).any(axis=-1)
        except ValueError:
            dead = None
        if dead is not None and (nan_rows <= dead).all():
            default = (tr("NaN in the weights of a fully masked query row: every score is -inf, the max is -inf "
                          "and -inf - (-inf) = NaN. A fully masked row must give zero weights and a zero output."))
        else:
            default = (tr("NaN in the weights: np.exp of a large score overflows to inf and inf / inf = NaN. "
                          "Subtract each row's max score before np.exp, as in stage 2."))
    return dict(mistakes=mistakes, hint=default)


def out_diagnosis(w_expected, V):
    """The known mistake behind a wrong attention output, and the hint otherwise."""
    return dict(mistakes={
        tr("The output looks like the single Value with the largest weight: attention returns the weighted sum "
           "of all Values, weights @ V, not a pick (slide 6)."): lambda: _pick(w_expected, V),
    }, hint=tr("out = weights @ V: each output row is the weighted sum of the Value rows (slides 15, 36)."))


def _pick(w, V):
    """The Value row with the largest weight, for every query (the slide-6 mistake)."""
    idx = np.argmax(w, axis=-1)                                          # (..., m)
    Vb = np.broadcast_to(V, w.shape[:-2] + V.shape[-2:])
    picked = np.take_along_axis(Vb, idx[..., None], axis=-2)            # (..., m, d_v)
    return np.where((w.sum(-1) > 0)[..., None], picked, 0.0)


def unpack(result, what):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        kind = type(result).__name__
        raise AssertionError(tr("{what} returned a {kind}, expected a pair (out, weights).", what=what, kind=kind))
    return result


def check_attention(result, Q, K, V, mask=None, what="scaled_dot_product_attention", d_model=None, expected=None):
    exp_out, exp_w = expected if expected is not None else ref.scaled_dot_product_attention(Q, K, V, mask)
    out, w = unpack(result, what)
    w_arr = as_array(w, what=f"{what}: weights")
    if w_arr.shape != exp_w.shape and w_arr.shape == exp_w.shape[:-2] + exp_w.shape[:-3:-1]:
        raise AssertionError(tr("{what}: weights have shape {shape}, expected {expected} (..., m, n): "
                                "they look transposed. Row i holds query i's weights over the n keys: scores = Q "
                                "K^T, not K Q^T.", what=what, shape=w_arr.shape, expected=exp_w.shape))
    assert_matches(w, exp_w, what=f"{what}: weights", **TOL, **weights_diagnosis(w_arr, Q, K, V, mask, d_model))
    assert_matches(out, exp_out, what=f"{what}: out", **TOL, **out_diagnosis(exp_w, V))


def call_sdpa(student, Q, K, V, mask=None):
    """Call the student; when it crashes on valid input, find out which shapes it cannot handle."""
    args = (Q, K, V) if mask is None else (Q, K, V, mask)
    try:
        return student.scaled_dot_product_attention(*args)
    except StudentError as exc:
        if exc.kind != "error":
            raise
        first = (tr("scaled_dot_product_attention raised {exception}: {message} for Q {q_shape}, K "
                    "{k_shape}, V {v_shape}",
                    exception=exc.type_name, message=exc.message, q_shape=Q.shape, k_shape=K.shape,
                    v_shape=V.shape))
        first += "" if mask is None else f", mask {np.shape(mask)}"
        if Q.ndim > 2 or K.ndim > 2:
            q2, k2, v2 = (A.reshape(-1, *A.shape[-2:])[0] for A in (Q, K, V))
            try:
                student.scaled_dot_product_attention(q2, k2, v2)
                raise AssertionError(
                    tr("{first}. It works on 2-D inputs, so the leading (batch/head) dimensions are the problem: "
                       "transpose only the last two axes of K (np.swapaxes(K, -1, -2)); K.T reverses every axis.",
                       first=first)) from None
            except StudentError:
                pass
        if Q.shape[-2] != K.shape[-2]:
            n = K.shape[-2]
            try:
                student.scaled_dot_product_attention(Q[..., :1, :].repeat(n, -2), K, V)
                raise AssertionError(
                    tr("{first}. It works when m == n, so queries and keys seem mixed up: scores = Q K^T has "
                       "shape (..., m, n), the softmax runs over the n keys, and out = weights @ V.",
                       first=first)) from None
            except StudentError:
                pass
        raise


# ---------------------------------------------------------------- attention_context (slides 11-15)

def _check_context(result, s, H, what):
    ctx, w = unpack(result, what)
    exp_ctx, exp_w = ref.attention_context(s, H)
    assert_matches(w, exp_w, what=f"{what}: weights", **TOL, mistakes={
        tr("The weights look computed from scores divided by sqrt(d): the LSTM attention of slides 12-13 uses "
           "the plain dot product."): lambda: _softmax(H @ s / np.sqrt(len(s))),
        tr("The weights look like the raw dot products: apply the softmax (slide 14)."): lambda: H @ s,
    }, hint=tr("weights = softmax(encoder_states @ decoder_state) (slides 12-14)."))
    assert_matches(ctx, exp_ctx, what=f"{what}: context", **TOL, mistakes={
        tr("The context is the single encoder state with the largest weight: attention is a weighted sum of all "
           "encoder states (slides 6, 15)."): lambda: H[np.argmax(exp_w)],
        tr("The context looks like the plain mean of the encoder states: weight each state by its attention "
           "weight."):
        lambda: H.mean(axis=0),
    }, hint=tr("context = sum_j weights[j] * encoder_states[j], a weighted sum (slide 15)."))


@pytest.mark.parametrize("n,d", [(1, 3), (4, 6), (9, 2)])
def test_attention_context_values(student, n, d):
    """attention_context: unscaled dot-product scores, softmax, weighted sum of encoder states"""
    g = rng(10 * n + d)
    s, H = g.normal(size=d), g.normal(size=(n, d))
    _check_context(student.attention_context(s, H), s, H,
                   f"attention_context(decoder_state ({d},), encoder_states ({n}, {d}))")


def test_attention_context_is_weighted_sum_not_pick(student):
    """the context blends every encoder state by its weight; it does not pick the best one (slide 6)"""
    H = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    s = np.array([1.0, 0.8, -0.5])
    _check_context(student.attention_context(s, H), s, H, tr("attention_context with scores [1, 0.8, -0.5]"))


def test_attention_context_large_scores_stable(student):
    """attention_context stays finite when the scores are in the thousands"""
    g = rng(40)
    s, H = g.normal(size=8) * 30, g.normal(size=(6, 8)) * 30
    result = student.attention_context(s, H)
    ctx, w = unpack(result, tr("attention_context with large scores"))
    if not np.isfinite(as_array(w, what=tr("attention_context weights"))).all():
        raise AssertionError(tr("attention_context with scores in the thousands gave non-finite weights: the "
                                "softmax overflows. Subtract the max score before np.exp (stage 2)."))
    _check_context(result, s, H, tr("attention_context with large scores"))


def test_attention_context_rejects_bad_shapes(student):
    """attention_context raises ValueError when the state sizes differ or ranks are wrong"""
    with raises_student(ValueError, what="attention_context(decoder_state (3,), encoder_states (4, 5))"):
        student.attention_context(np.ones(3), np.ones((4, 5)))
    with raises_student(ValueError, what="attention_context(decoder_state (1, 3), encoder_states (4, 3))"):
        student.attention_context(np.ones((1, 3)), np.ones((4, 3)))
    # wrong ranks whose sizes fit, so that numpy itself would not complain (the contract: wrong rank -> ValueError)
    for s_shape, h_shape in (((3, 3), (3, 3)), ((3,), (2, 3, 3)), ((), (4, 1)), ((3,), (3,))):
        with raises_student(ValueError, what=f"attention_context(decoder_state {s_shape}, encoder_states {h_shape})"):
            student.attention_context(np.ones(s_shape), np.ones(h_shape))


# ---------------------------------------------------------------- scaled_dot_product_attention

@pytest.mark.parametrize("m,n,d_k,d_v", [(4, 4, 8, 8), (3, 6, 5, 2), (7, 2, 16, 3), (1, 5, 9, 4)])
def test_sdpa_values(student, m, n, d_k, d_v):
    """scaled_dot_product_attention matches softmax(Q K^T / sqrt(d_k)) V, including m != n and d_v != d_k"""
    g = rng(m * 100 + n * 10 + d_k)
    Q, K, V = g.normal(size=(m, d_k)), g.normal(size=(n, d_k)), g.normal(size=(n, d_v))
    check_attention(call_sdpa(student, Q, K, V), Q, K, V,
                    what=f"scaled_dot_product_attention(Q ({m}, {d_k}), K ({n}, {d_k}), V ({n}, {d_v}))")


@pytest.mark.parametrize("q_shape,k_lead", [((2, 5, 8), (2,)), ((2, 3, 5, 8), (2, 3)), ((2, 3, 5, 8), (3,)),
                                            ((5, 8), (2, 3))])
def test_sdpa_batch_and_heads(student, q_shape, k_lead):
    """scaled_dot_product_attention works on (batch, heads, m, d) inputs and broadcasts leading dimensions"""
    g = rng(len(q_shape) * 10 + len(k_lead))
    Q = g.normal(size=q_shape)
    K, V = g.normal(size=k_lead + (7, 8)), g.normal(size=k_lead + (7, 6))
    check_attention(call_sdpa(student, Q, K, V), Q, K, V,
                    what=f"scaled_dot_product_attention(Q {q_shape}, K {K.shape}, V {V.shape})")


@pytest.mark.parametrize("mask_shape", [(5, 7), (1, 5, 7), (2, 1, 1, 7), (2, 3, 5, 7), (7,)])
def test_sdpa_mask_broadcasts(student, mask_shape):
    """a boolean mask of shape (m, n), (1, m, n), (B, 1, 1, n) or (B, h, m, n) is broadcast over the scores"""
    g = rng(sum(mask_shape))
    Q, K, V = g.normal(size=(2, 3, 5, 4)), g.normal(size=(2, 3, 7, 4)), g.normal(size=(2, 3, 7, 6))
    mask = g.random(mask_shape) < 0.6
    mask[..., 0] = True  # every row keeps at least one key here; fully masked rows have their own test
    check_attention(call_sdpa(student, Q, K, V, mask), Q, K, V, mask,
                    what=tr("scaled_dot_product_attention with a mask of shape {mask_shape}", mask_shape=mask_shape))


def test_sdpa_mask_true_means_attend(student):
    """blocked keys get weight exactly 0 and the allowed ones renormalise to 1 (mask True = may attend)"""
    g = rng(50)
    Q, K, V = g.normal(size=(6, 4)), g.normal(size=(6, 4)), g.normal(size=(6, 3))
    mask = np.tril(np.ones((6, 6), dtype=bool))       # causal: query i sees keys 0..i
    out, w = unpack(call_sdpa(student, Q, K, V, mask), tr("scaled_dot_product_attention with a causal mask"))
    w_arr = assert_shape(w, (6, 6), what=tr("weights with a causal mask"))
    hint = which_mistake(w_arr, **weights_diagnosis(w_arr, Q, K, V, mask))
    if not np.all(w_arr[~mask] == 0.0):
        raise AssertionError(tr("weights with a causal mask: blocked entries (mask False) are not 0, e.g. "
                                "weights[0, 1:] = {weights}. {hint}",
                                weights=np.round(w_arr[0, 1:], 4), hint=hint))
    check_attention((out, w), Q, K, V, mask, what=tr("scaled_dot_product_attention with a causal mask"))


def test_sdpa_fully_masked_row_is_zero(student):
    """a query row with every key blocked gets zero weights and a zero output, never NaN"""
    g = rng(51)
    Q, K, V = g.normal(size=(2, 4, 3)), g.normal(size=(2, 5, 3)), g.normal(size=(2, 5, 2))
    mask = g.random((2, 4, 5)) < 0.7
    mask[:, :, 0] = True
    mask[0, 1, :] = False
    mask[1, 3, :] = False
    check_attention(call_sdpa(student, Q, K, V, mask), Q, K, V, mask,
                    what=tr("scaled_dot_product_attention with fully masked query rows"))


def test_sdpa_large_scores_stable(student):
    """scaled_dot_product_attention stays finite and exact when scores are around 1e4"""
    g = rng(52)
    Q, K, V = g.normal(size=(5, 16)) * 40, g.normal(size=(6, 16)) * 40, g.normal(size=(6, 4))
    check_attention(call_sdpa(student, Q, K, V), Q, K, V, what=tr("scaled_dot_product_attention with scores ~1e4"))


def test_sdpa_output_is_weighted_sum_of_values(student):
    """each output row is the student's own weights times V: a blend of all Values, not a pick (slide 6)"""
    g = rng(53)
    Q, K, V = g.normal(size=(5, 4)) * 0.3, g.normal(size=(6, 4)) * 0.3, g.normal(size=(6, 3))
    out, w = unpack(call_sdpa(student, Q, K, V), "scaled_dot_product_attention")
    w_arr = assert_shape(w, (5, 6), what="weights")
    rows = w_arr.sum(axis=-1)
    assert np.allclose(rows, 1.0, atol=1e-10), (
        # i18n: {sums} are the rows' sums; {diagnosis} is a sentence (its own message) naming the likely mistake, or
        # empty.
        tr("weights rows sum to {sums}, not 1. {diagnosis}",
           sums=np.round(rows, 4),
           diagnosis=which_mistake(w_arr, **weights_diagnosis(w_arr, Q, K, V))))
    assert_matches(out, w_arr @ V, what=tr("out compared with weights @ V"), **TOL,
                   mistakes={tr("The output picks the Value with the largest weight; attention is the weighted "
                                "sum of all Values, weights @ V (slide 6)."): lambda: _pick(w_arr, V)},
                   hint=tr("out must be weights @ V (slides 15, 36)."))


def test_sdpa_rejects_bad_shapes(student):
    """scaled_dot_product_attention raises ValueError for mismatched d_k, mismatched n, a 1-D Q or a mask that does not fit"""  # noqa: E501 (the report's test name)
    with raises_student(ValueError, what="scaled_dot_product_attention(Q (3, 4), K (5, 6), V (5, 2))"):
        student.scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 6)), np.ones((5, 2)))
    with raises_student(ValueError, what="scaled_dot_product_attention(Q (3, 4), K (5, 4), V (6, 2))"):
        student.scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((6, 2)))
    with raises_student(ValueError, what="scaled_dot_product_attention(Q (4,), K (5, 4), V (5, 2))"):
        student.scaled_dot_product_attention(np.ones(4), np.ones((5, 4)), np.ones((5, 2)))
    with raises_student(ValueError, what="scaled_dot_product_attention(Q (3, 4), K (5, 4), V (5,))"):
        student.scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones(5))
    with raises_student(ValueError, what=tr("scaled_dot_product_attention with a (4, 5) mask for (3, 5) scores")):
        student.scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)),
                                             np.ones((4, 5), dtype=bool))


def speed_inputs(g) -> list:
    """The speed test's five fresh (Q, K, V) triples of 8000 queries and 4 keys, drawn from ``g`` (also
    benchmarks/speed_tests.py's)."""
    return [(g.normal(size=(8000, 4)), g.normal(size=(4, 4)), g.normal(size=(4, 4))) for _ in range(5)]


def test_sdpa_is_vectorised(student):
    """scaled_dot_product_attention handles all queries with matrix operations, not a Python loop (slide 38)"""
    inputs = speed_inputs(rng(54))

    def check(got, args):
        check_attention(got, *args, what=tr("scaled_dot_product_attention on 8000 queries (checked while timing "
                                            "it)"))
    slow = testing.cpu_slowdown(student, "scaled_dot_product_attention", ref.scaled_dot_product_attention, inputs,
                                check)
    assert slow.within(SLOWDOWN_LIMIT), tr(
        "scaled_dot_product_attention took {took} on 8000 queries and 4 keys. The usual cause is a Python loop over "
        "the query rows; compute all queries at once: Q @ K^T, one softmax over the last axis, weights @ V (slide "
        "38).", took=slow.said(SLOWDOWN_LIMIT))


# ---------------------------------------------------------------- self_attention (slides 30-38)

def _check_self_attention(result, X, Wq, Wk, Wv, mask, what):
    out, w = unpack(result, what)
    exp_out, exp_w = ref.self_attention(X, Wq, Wk, Wv, mask)
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    value_mistakes = {
        tr("The Values look computed with W_k instead of W_v (slide 36)."):
        lambda: ref.self_attention(X, Wq, Wk, Wk, mask)[0],
        tr("The Values look computed with W_q instead of W_v (slide 36)."):
        lambda: ref.self_attention(X, Wq, Wk, Wq, mask)[0],
        tr("The output seems to use X itself as the Values: V = X @ W_v (slide 36)."):
        lambda: ref.scaled_dot_product_attention(Q, K, X, mask)[0],
    }
    out_arr = as_array(out, what=f"{what}: out")
    if out_arr.shape != exp_out.shape:
        raise AssertionError(join([tr("{what}: out has shape {shape}, expected {expected} (n, d_v).",
                                      what=what, shape=out_arr.shape, expected=exp_out.shape),
                                   which_mistake(out_arr, value_mistakes,
                                                 tr("The Values are X @ W_v, so out has d_v = W_v.shape[1] "
                                                    "columns."))], sep=" "))
    weights = weights_diagnosis(w, Q, K, V, mask, d_model=X.shape[-1])
    assert_matches(w, exp_w, what=f"{what}: weights", **TOL, hint=weights["hint"], mistakes={
        tr("Query and Key projections look swapped: Q = X @ W_q and K = X @ W_k (slides 32-33)."):
        lambda: ref.scaled_dot_product_attention(X @ Wk, X @ Wq, V, mask)[1],
        **weights["mistakes"]})
    output = out_diagnosis(exp_w, V)
    assert_matches(out, exp_out, what=f"{what}: out", **TOL, hint=output["hint"],
                   mistakes={**value_mistakes, **output["mistakes"]})


@pytest.mark.parametrize("n,d_model,d_k,d_v", [(5, 8, 4, 3), (3, 6, 6, 6), (7, 10, 2, 5)])
def test_self_attention_values(student, n, d_model, d_k, d_v):
    """self_attention projects X with W_q, W_k, W_v and applies scaled dot-product attention (slides 32-37)"""
    g = rng(n * 100 + d_model + d_k)
    X = g.normal(size=(n, d_model))
    Wq, Wk, Wv = g.normal(size=(d_model, d_k)), g.normal(size=(d_model, d_k)), g.normal(size=(d_model, d_v))
    _check_self_attention(student.self_attention(X, Wq, Wk, Wv), X, Wq, Wk, Wv, None,
                          f"self_attention(X ({n}, {d_model}), W_q/W_k ({d_model}, {d_k}), W_v ({d_model}, {d_v}))")


def test_self_attention_with_mask(student):
    """self_attention passes the mask on: a causal mask blocks the future tokens"""
    g = rng(60)
    X = g.normal(size=(6, 8))
    Wq, Wk, Wv = g.normal(size=(8, 4)), g.normal(size=(8, 4)), g.normal(size=(8, 5))
    mask = np.tril(np.ones((6, 6), dtype=bool))
    _check_self_attention(student.self_attention(X, Wq, Wk, Wv, mask), X, Wq, Wk, Wv, mask,
                          tr("self_attention(X (6, 8), ..., causal mask)"))


def test_self_attention_permutation_equivariant(student):
    """without positions, reordering the tokens only reorders the outputs (why slide 21 needs positional encoding)"""
    g = rng(61)
    X = g.normal(size=(5, 6))
    Wq, Wk, Wv = g.normal(size=(6, 3)), g.normal(size=(6, 3)), g.normal(size=(6, 4))
    perm = np.array([3, 0, 4, 1, 2])
    out, w = unpack(student.self_attention(X, Wq, Wk, Wv), "self_attention(X)")
    out_p, w_p = unpack(student.self_attention(X[perm], Wq, Wk, Wv), "self_attention(X[perm])")
    out, out_p = as_array(out, what="self_attention(X): out"), as_array(out_p, what="self_attention(X[perm]): out")
    assert_close(out_p, out[perm], what=tr("self_attention(X[perm]) compared with self_attention(X)[perm]"), **TOL,
                 hint=tr("Self-attention treats tokens as a set: every token uses the same W_q, W_k, W_v (slide "
                         "37) and nothing depends on a token's index."))
    assert_close(w_p, as_array(w, what="weights")[perm][:, perm], what=tr("weights of the permuted tokens"), **TOL,
                 hint=tr("weights[i, j] depends only on tokens i and j, not on their positions."))


def test_self_attention_rejects_bad_shapes(student):
    """self_attention raises ValueError when W_* do not match d_model or W_q and W_k disagree on d_k"""
    X = np.ones((4, 6))
    with raises_student(ValueError, what="self_attention(X (4, 6), W_q (5, 3), ...)"):
        student.self_attention(X, np.ones((5, 3)), np.ones((6, 3)), np.ones((6, 2)))
    with raises_student(ValueError, what="self_attention(X (4, 6), W_q (6, 3), W_k (6, 4), W_v (6, 2))"):
        student.self_attention(X, np.ones((6, 3)), np.ones((6, 4)), np.ones((6, 2)))
    # wrong ranks whose sizes fit, so that numpy itself would not complain (the contract: wrong rank -> ValueError)
    with raises_student(ValueError, what="self_attention(X (4, 6), W_q (6, 6, 3), W_k (6, 6, 3), W_v (6, 6, 2))"):
        student.self_attention(X, np.ones((6, 6, 3)), np.ones((6, 6, 3)), np.ones((6, 6, 2)))
    with raises_student(ValueError, what="self_attention(X (4, 6), W_q (6,), W_k (6,), W_v (6, 2))"):
        student.self_attention(X, np.ones(6), np.ones(6), np.ones((6, 2)))


# ---------------------------------------------------------------- every size, calls in a row

N_KEYS = Axis("n", 3, 7, tr("one key"))
SIZES = {  # function -> (its sizes, its inputs for given sizes)
    "attention_context": ([Axis("n", 3, 8, tr("one encoder state")), Axis("d", 4, 7, tr("one feature"))],
                          lambda g, s: (g.normal(size=s["d"]), g.normal(size=(s["n"], s["d"])))),
    "scaled_dot_product_attention": (
        [Axis("B", 2, 3, tr("a batch of one")), Axis("m", 2, 5, tr("one query")), N_KEYS,
         Axis("d_k", 4, 8, tr("one feature")),
         Axis("d_v", 3, 6, tr("one value feature"))],
        lambda g, s: (g.normal(size=(s["B"], s["m"], s["d_k"])), g.normal(size=(s["B"], s["n"], s["d_k"])),
                      g.normal(size=(s["B"], s["n"], s["d_v"])))),
    "self_attention": (
        [Axis("n", 3, 6, tr("one token")), Axis("d_model", 4, 7, tr("one input feature")),
         Axis("d_k", 2, 5, tr("queries and keys of one feature")), Axis("d_v", 3, 4, tr("one value feature"))],
        lambda g, s: (g.normal(size=(s["n"], s["d_model"])), g.normal(size=(s["d_model"], s["d_k"])),
                      g.normal(size=(s["d_model"], s["d_k"])), g.normal(size=(s["d_model"], s["d_v"])))),
}


@pytest.mark.parametrize("name", list(SIZES))
def test_sizes_of_one_and_calls_in_a_row(student, name):
    """every function works with one query, one key, one feature, a batch of one, and on calls in a row with other sizes"""  # noqa: E501 (the report's test name)
    axes, make = SIZES[name]
    g = rng(70 + list(SIZES).index(name))
    check_function_sizes(getattr(student, name), getattr(ref, name), axes, lambda s: make(g, s), what=name, **TOL)


# ---------------------------------------------------------------- properties over generated inputs (issue 35)
# Inputs drawn by Hypothesis from this submission's seed (grader/engine/properties.py): m != n, d_v != d_k,
# any size 1, leading dimensions that broadcast (some missing, some 1), every mask form (none, 1-D over the
# keys, (m, n), with leading dimensions, axes at 1), fully masked rows, scores up to the thousands. The
# oracle is the contract's formula in long double, not the reference.

def _oracle_attention(Q, K, V, mask=None, scaled=True):
    """(out, weights) of softmax(Q K^T / sqrt(d_k)) V (unscaled scores unless ``scaled``) with blocked scores
    at -inf; a fully masked row gives zero weights and a zero output. Long double."""
    Ql, Kl, Vl = (A.astype(np.longdouble) for A in (Q, K, V))
    scores = np.sum(Ql[..., :, None, :] * Kl[..., None, :, :], axis=-1)
    if scaled:
        scores = scores / np.sqrt(np.longdouble(Q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        e = np.exp(scores - np.where(np.isfinite(m), m, 0))
        total = np.sum(e, axis=-1, keepdims=True)
        w = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    out = np.sum(w[..., :, :, None] * Vl[..., None, :, :], axis=-2)
    return out.astype(np.float64), w.astype(np.float64)


def _lead_shapes(draw, names, ndim_max=2, full=None):
    """Leading dimensions for each of ``names`` that broadcast together: a common shape (drawn, or ``full``),
    each keeping some of its trailing leading axes and setting some to 1."""
    if full is None:
        full = draw(st.lists(st.integers(1, 3), min_size=0, max_size=ndim_max), "leading dimensions")
    shapes = []
    for name in names:
        keep = draw(st.integers(0, len(full)), f"leading axes of {name}")
        lead = full[len(full) - keep:]
        ones = draw(st.lists(st.booleans(), min_size=len(lead), max_size=len(lead)), f"axes of {name} at 1")
        shapes.append(tuple(1 if one else s for s, one in zip(lead, ones)))
    return full, shapes


def _mask_for(draw, g, lead, m, n):
    """None, or a boolean mask broadcastable to (*lead, m, n): 1-D over the keys, 2-D, or with leading
    dimensions, any axis at 1, each entry allowed with a drawn probability (0 and 1 included)."""
    form = draw(st.sampled_from(["none", "keys (n,)", "(m, n)", "with leading dimensions"]), "mask form")
    if form == "none":
        return None
    if form == "keys (n,)":
        shape = (n,)
    else:
        full = (*(lead if form == "with leading dimensions" else ()), m, n)
        ones = draw(st.lists(st.booleans(), min_size=len(full), max_size=len(full)), "mask axes at 1")
        shape = tuple(1 if one else s for s, one in zip(full, ones))
    p = draw(st.sampled_from([0.7, 0.4, 1.0, 0.0]), "share of allowed keys")
    mask = g.random(shape) < p
    draw.note("mask", mask)
    return mask


def test_sdpa_properties_on_generated_inputs(student):
    """scaled_dot_product_attention holds its contract on generated inputs: m != n, d_v != d_k, any size 1, broadcast leading dimensions, every mask form"""  # noqa: E501 (the report's test name)
    def prop(draw):
        m, n, d_k, d_v = (draw(st.integers(1, 5), name) for name in ("m", "n", "d_k", "d_v"))
        big = draw(st.sampled_from([None, "n", "d_k"]), "a size past 256")  # sizes compared as numbers
        n, d_k = (300 if big == "n" else n), (300 if big == "d_k" else d_k)
        _, (q_lead, k_lead) = _lead_shapes(draw, ("Q", "K"))
        # V's and the mask's leading dimensions broadcast into those of Q and K: the contract leaves open
        # whether weights (..., m, n) would also take leading dimensions only V or the mask has
        lead = list(np.broadcast_shapes(q_lead, k_lead))
        _, (v_lead,) = _lead_shapes(draw, ("V",), full=lead)
        g = np.random.default_rng(draw(st.integers(0, 2 ** 16), "values (seed)"))
        scale = draw(st.sampled_from([1.0, 0.1, 30.0]), "scale of Q and K")
        Q, K = g.normal(size=(*q_lead, m, d_k)) * scale, g.normal(size=(*k_lead, n, d_k)) * scale
        V = g.normal(size=(*v_lead, n, d_v))
        for name, A in (("Q", Q), ("K", K), ("V", V)):
            draw.note(f"{name}.shape", A.shape)
        mask = _mask_for(draw, g, lead, m, n)
        check_attention(call_sdpa(student, Q, K, V, mask), Q, K, V, mask,
                        what=f"scaled_dot_product_attention(Q {Q.shape}, K {K.shape}, V {V.shape}"
                             f"{'' if mask is None else f', mask {mask.shape}'})",
                        expected=_oracle_attention(Q, K, V, mask))
    properties.check(prop, case=3040, examples=10, what="scaled_dot_product_attention")


def test_context_and_self_attention_properties_on_generated_inputs(student):
    """attention_context and self_attention hold their contract on generated inputs: any size 1, d_k != d_model, masks, large scores"""  # noqa: E501 (the report's test name)
    def prop(draw):
        n, d = draw(st.integers(1, 6), "n"), draw(st.one_of(st.integers(1, 6), st.just(300)), "d")
        g = np.random.default_rng(draw(st.integers(0, 2 ** 16), "values (seed)"))
        scale = draw(st.sampled_from([1.0, 30.0]), "scale") / (1.0 if d < 100 else 8.0)
        s, H = g.normal(size=d) * scale, g.normal(size=(n, d)) * scale
        _check_context(student.attention_context(s, H), s, H,
                       f"attention_context(decoder_state ({d},), encoder_states ({n}, {d}))")
        d_k, d_v = draw(st.one_of(st.integers(1, 5), st.just(300)), "d_k"), draw(st.integers(1, 5), "d_v")
        X = g.normal(size=(n, d)) / (1.0 if d < 100 else 8.0)
        Wq, Wk, Wv = g.normal(size=(d, d_k)), g.normal(size=(d, d_k)), g.normal(size=(d, d_v))
        mask = _mask_for(draw, g, (), n, n)
        _check_self_attention(student.self_attention(X, Wq, Wk, Wv, *(() if mask is None else (mask,))),
                              X, Wq, Wk, Wv, mask,
                              f"self_attention(X ({n}, {d}), W_q/W_k ({d}, {d_k}), W_v ({d}, {d_v})"
                              f"{'' if mask is None else f', mask {mask.shape}'})")
    properties.check(prop, case=3041, examples=6, what="attention_context, self_attention")


def test_calls_in_a_row_in_orders_drawn_from_the_seed(student):
    """every function stays right on calls in a row, in orders drawn from your seed: short then long, long then short, another d_k"""  # noqa: E501 (the report's test name)
    def sdpa_check(got, args):
        check_attention(got, *args, expected=_oracle_attention(*args))

    def context_check(got, args):
        s, H = args
        exp_ctx, exp_w = _oracle_attention(s[None], H, H, scaled=False)
        ctx, w = unpack(got, "attention_context")
        assert_close(w, exp_w[0], what=tr("attention_context weights"), **TOL)
        assert_close(ctx, exp_ctx[0], what=tr("attention_context context"), **TOL)
    functions = [
        properties.Function("attention_context", {"n": (1, 7), "d": (1, 7)},
                            lambda s, g: (g.normal(size=s["d"]), g.normal(size=(s["n"], s["d"]))),
                            student.attention_context, context_check, features=("d",)),
        properties.Function("scaled_dot_product_attention", {"B": (1, 3), "m": (1, 5), "n": (1, 6), "d_k": (1, 6),
                                                             "d_v": (1, 4)},
                            lambda s, g: (g.normal(size=(s["B"], s["m"], s["d_k"])),
                                          g.normal(size=(s["B"], s["n"], s["d_k"])),
                                          g.normal(size=(s["B"], s["n"], s["d_v"])),
                                          np.tril(np.ones((s["m"], s["n"]), dtype=bool))),
                            student.scaled_dot_product_attention, sdpa_check, features=("d_k", "d_v")),
    ]
    properties.calls_in_a_row(functions, case=3042, examples=2, steps=4, what=tr("calls in a row"))
