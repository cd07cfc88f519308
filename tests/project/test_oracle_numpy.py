"""The numpy references of stages 1-4 checked against torch, an oracle nobody here wrote.

Every expected value in the hidden suites of stages 1-4 comes from solutions/;
this file makes sure those references agree with torch's own implementations
(torch.softmax, torch.log_softmax, F.scaled_dot_product_attention with boolean
masks, F.cosine_similarity, F.one_hot, nn.Embedding, torch.matmul) on random and
adversarial inputs. torch runs here, in the project tests, never in a numpy stage.
"""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]


def _load(stage):
    spec = importlib.util.spec_from_file_location(f"_oracle_ref_{stage}", ROOT / "solutions" / f"{stage}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sim = _load("a01_similarity")
smx = _load("a02_softmax")
att = _load("a03_attention")
pos = _load("a04_positional")


def t(x):
    return torch.as_tensor(np.asarray(x), dtype=torch.float64)


def close(actual, expected, atol=1e-12, rtol=1e-12):
    expected = expected.numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    np.testing.assert_allclose(np.asarray(actual), expected, atol=atol, rtol=rtol)


@pytest.fixture
def rng():
    return np.random.default_rng(20250401)


# ---------------------------------------------------------------- stage 1

def test_dot_product_and_scores_match_torch(rng):
    u, v = rng.normal(size=7), rng.normal(size=7)
    close(sim.dot_product(u, v), torch.dot(t(u), t(v)))
    keys = rng.normal(size=(5, 7))
    close(sim.similarity_scores(u, keys), torch.mv(t(keys), t(u)))


@pytest.mark.parametrize("q_shape,k_shape", [((4, 3), (6, 3)), ((2, 4, 3), (2, 6, 3)), ((2, 1, 4, 3), (5, 6, 3)),
                                             ((4, 3), (2, 2, 6, 3))])
def test_similarity_matrix_matches_torch_matmul_with_broadcasting(rng, q_shape, k_shape):
    Q, K = rng.normal(size=q_shape), rng.normal(size=k_shape)
    close(sim.similarity_matrix(Q, K), torch.matmul(t(Q), t(K).transpose(-1, -2)))


def test_cosine_similarity_matches_torch(rng):
    for _ in range(20):
        u, v = rng.normal(size=9) * 10 ** rng.uniform(-3, 3), rng.normal(size=9)
        close(sim.cosine_similarity(u, v), F.cosine_similarity(t(u), t(v), dim=0))
    u = rng.normal(size=4)
    close(sim.cosine_similarity(u, -3.0 * u), -1.0)
    # torch clamps the norm at eps and returns 0 for a zero vector, as the contract asks
    zero = np.zeros(4)
    assert sim.cosine_similarity(zero, u) == 0.0 == float(F.cosine_similarity(t(zero), t(u), dim=0))


# ---------------------------------------------------------------- stage 2

@pytest.mark.parametrize("shape,axis", [((5,), -1), ((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 1), ((2, 3, 4), -3)])
@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_softmax_and_log_softmax_match_torch(rng, shape, axis, scale):
    x = rng.normal(size=shape) * scale
    close(smx.softmax(x, axis=axis), torch.softmax(t(x), dim=axis))
    close(smx.log_softmax(x, axis=axis), torch.log_softmax(t(x), dim=axis), atol=1e-9)


def test_softmax_with_neg_inf_matches_torch_and_fully_masked_row_is_zero(rng):
    x = rng.normal(size=(4, 6)) * 100
    x[0, [1, 3]] = -np.inf
    x[2, :5] = -np.inf
    close(smx.softmax(x), torch.softmax(t(x), dim=-1))
    close(smx.log_softmax(x), torch.log_softmax(t(x), dim=-1))
    x[1, :] = -np.inf  # torch gives NaN here; the contract asks for zeros / -inf
    assert torch.isnan(torch.softmax(t(x), dim=-1)[1]).all()
    w = smx.softmax(x)
    assert np.all(w[1] == 0.0) and not np.isnan(w).any()
    lw = smx.log_softmax(x)
    assert np.all(np.isneginf(lw[1])) and not np.isnan(lw).any()
    close(w[[0, 2, 3]], torch.softmax(t(x[[0, 2, 3]]), dim=-1))


def test_log_softmax_keeps_tiny_probabilities_like_torch():
    x = np.array([0.0, -800.0, -1e4])
    close(smx.log_softmax(x), torch.log_softmax(t(x), dim=0), atol=0, rtol=1e-15)


# ---------------------------------------------------------------- stage 3

def _sdpa_torch(Q, K, V, mask=None):
    out = F.scaled_dot_product_attention(t(Q), t(K), t(V), attn_mask=None if mask is None else torch.as_tensor(mask))
    return out


def _weights_torch(Q, K, mask=None):
    s = t(Q) @ t(K).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~torch.as_tensor(mask), float("-inf"))
    return torch.softmax(s, dim=-1)


@pytest.mark.parametrize(
    "q,k,dv,mask_shape",
    [
        ((5, 4), (5, 4), 4, None),
        ((3, 4), (6, 4), 2, None),                 # m != n, d_v != d_k
        ((2, 3, 5, 8), (2, 3, 7, 8), 6, (5, 7)),   # batch, heads, (m, n) mask
        ((2, 3, 5, 8), (2, 3, 7, 8), 6, (1, 5, 7)),
        ((2, 3, 5, 8), (2, 3, 7, 8), 6, (2, 1, 1, 7)),  # key-padding style (..., 1, n)
        ((4, 5, 3), (4, 5, 3), 3, (4, 5, 5)),
    ],
)
def test_scaled_dot_product_attention_matches_torch(rng, q, k, dv, mask_shape):
    Q, K = rng.normal(size=q), rng.normal(size=k)
    V = rng.normal(size=k[:-1] + (dv,))
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) < 0.7
        mask[..., 0] = True  # torch returns NaN for fully masked rows; keep every row alive here
    out, w = att.scaled_dot_product_attention(Q, K, V, mask)
    close(out, _sdpa_torch(Q, K, V, mask), atol=1e-12)
    close(w, _weights_torch(Q, K, mask), atol=1e-12)


def test_fully_masked_rows_are_zero_like_torch_sdpa(rng):
    """Recent torch (2.5+) returns a zero output row for a fully masked query, as the contract does."""
    Q, K, V = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    mask = np.ones((4, 5), dtype=bool)
    mask[2] = False
    out, w = att.scaled_dot_product_attention(Q, K, V, mask)
    assert np.all(out[2] == 0) and np.all(w[2] == 0)
    close(out, _sdpa_torch(Q, K, V, mask))


def test_self_attention_matches_torch(rng):
    X = rng.normal(size=(6, 10))
    Wq, Wk, Wv = rng.normal(size=(10, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 3))
    causal = np.tril(np.ones((6, 6), dtype=bool))
    for mask in (None, causal):
        out, w = att.self_attention(X, Wq, Wk, Wv, mask)
        ref = F.scaled_dot_product_attention(t(X @ Wq), t(X @ Wk), t(X @ Wv), is_causal=mask is not None)
        close(out, ref)
        close(w.sum(-1), np.ones(6))


def test_attention_context_is_unscaled_dot_product_attention(rng):
    h = rng.normal(size=(4, 6))
    s = rng.normal(size=6)
    ctx, w = att.attention_context(s, h)
    # torch scales by 1/sqrt(d) by default; scale=1.0 gives the unscaled attention of slides 11-15
    ref = F.scaled_dot_product_attention(t(s)[None], t(h), t(h), scale=1.0)[0]
    close(ctx, ref)
    close(w, torch.softmax(t(h) @ t(s), dim=0))


# ---------------------------------------------------------------- stage 4

def test_one_hot_and_embed_match_torch(rng):
    ids = rng.integers(0, 11, size=9)
    close(pos.one_hot(ids, 11), F.one_hot(torch.as_tensor(ids), 11).double())
    E = rng.normal(size=(11, 5))
    emb = torch.nn.Embedding(11, 5).double()
    with torch.no_grad():
        emb.weight.copy_(t(E))
        close(pos.embed(ids, E), emb(torch.as_tensor(ids)), atol=0, rtol=0)


def _pe_torch(max_len, d_model):
    """The table as written in the paper, computed in torch with a per-column loop (no shared code)."""
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    p = torch.arange(max_len, dtype=torch.float64)
    for j in range(d_model):
        i = j // 2
        angle = p / torch.tensor(10000.0, dtype=torch.float64) ** (torch.tensor(2.0 * i, dtype=torch.float64) / d_model)
        pe[:, j] = torch.sin(angle) if j % 2 == 0 else torch.cos(angle)
    return pe


@pytest.mark.parametrize("max_len,d_model", [(1, 1), (4, 4), (50, 7), (512, 64), (2048, 33)])
def test_positional_encoding_matches_torch_to_1e10(max_len, d_model):
    close(pos.sinusoidal_positional_encoding(max_len, d_model), _pe_torch(max_len, d_model), atol=1e-10, rtol=1e-10)


def test_float32_table_is_far_outside_the_contract_tolerance():
    """The contract's 1e-10 must separate a float32 table (off by ~3e-5 at 512 positions)."""
    pe32 = _pe_torch(512, 64).float().double().numpy()
    frequencies = 10000 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64)
    pe32_computed = torch.arange(512, dtype=torch.float32)[:, None] / frequencies
    diff_cast = np.abs(pe32 - pos.sinusoidal_positional_encoding(512, 64)).max()
    reference = pos.sinusoidal_positional_encoding(512, 64)[:, 0::2]
    diff_computed = np.abs(torch.sin(pe32_computed).double().numpy() - reference).max()
    assert diff_cast > 1e-9 and diff_computed > 1e-6


def test_add_positional_encoding_broadcasts_over_batch(rng):
    X = rng.normal(size=(3, 10, 6))
    close(pos.add_positional_encoding(X), t(X) + _pe_torch(10, 6), atol=1e-12)
