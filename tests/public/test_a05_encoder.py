"""Public tests of stage 5 (a05_encoder): run them with `python -m grader check a05_encoder`.

They check shapes and small cases you can verify by hand. The hidden suite
compares every class with a reference implementation on random weights and
inputs, checks masks of every rank, gradients, dropout and speed (see the
handout, "How you are graded").
"""
import math

import numpy as np
import torch

from grader.engine.testing import as_array, assert_close, assert_shape, raises_student
from grader.i18n import tr


def _run(student, kind, init, calls, state_dict=None, train=False):
    reply = student.probe("run", kind=kind, init=init, state_dict=state_dict, calls=calls, train=train)
    if reply.get("load_error") or reply.get("missing") or reply.get("unexpected"):
        raise AssertionError(
            tr("the test's weights do not fit your {kind}: {error} missing "
               "{missing}, unexpected {unexpected}; MultiHeadAttention must have exactly "
               "w_q, w_k, w_v, w_o = nn.Linear(d_model, d_model)",
               kind=kind, error=reply.get('load_error') or '',
               missing=reply.get('missing'), unexpected=reply.get('unexpected')))
    return reply["results"]


def _out(result, what):
    out = result["out"]
    if isinstance(out, dict):
        raise AssertionError(tr("{what} returned a {type}, not one tensor",
                                what=what, type=out.get('not_a_tensor')))
    return as_array(out, what)


def _attn(result, what):
    w = result["attn_weights"]
    if isinstance(w, dict) and "not_a_tensor" in w:
        raise AssertionError(tr("after a forward, {what}.attn_weights is {type}; store the weights (B, "
                                "h, m, n) after the softmax with self.attn_weights = weights.detach()",
                                what=what, type=w['not_a_tensor']))
    return as_array(w["value"], f"{what}.attn_weights")


def _identity_state(d):
    """w_q = w_k = w_v = w_o = identity, zero biases: attention on the inputs themselves."""
    state = {}
    for name in ("w_q", "w_k", "w_v", "w_o"):
        state[f"{name}.weight"] = torch.eye(d)
        state[f"{name}.bias"] = torch.zeros(d)
    return state


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_padding_mask_example(student):
    """padding_mask marks real tokens True, shape (B, 1, 1, n)"""
    ids = torch.tensor([[5, 7, 0, 0], [3, 0, 0, 0]])
    got = as_array(student.padding_mask(ids, 0), "padding_mask(ids, 0)")
    assert_shape(got, (2, 1, 1, 4), "padding_mask(ids (2, 4), 0)")
    expected = np.array([[[[1, 1, 0, 0]]], [[[1, 0, 0, 0]]]])
    assert_close(got.astype(np.int64), expected, what="padding_mask(ids, 0)", atol=0, rtol=0,
                 hint=tr("True (may attend) at real tokens, False at padding."))


def test_attention_shapes(student):
    """MultiHeadAttention: output (B, m, d_model), attn_weights (B, h, m, n) with rows summing to 1"""
    gen = torch.Generator().manual_seed(0)
    q, kv = torch.randn(2, 5, 16, generator=gen), torch.randn(2, 7, 16, generator=gen)
    res = _run(student, "MultiHeadAttention", {"d_model": 16, "n_heads": 4}, [{"args": [q, kv, kv]}])[0]
    assert_shape(_out(res, "MultiHeadAttention(16, 4)"), (2, 5, 16), tr("the output for query (2, 5, 16)"))
    w = assert_shape(_attn(res, "MultiHeadAttention"), (2, 4, 5, 7), tr("attn_weights for m=5 queries, n=7 keys"))
    assert_close(w.sum(-1), np.ones((2, 4, 5)), what=tr("the sum of each row of attn_weights"), atol=1e-5,
                 hint=tr("softmax over the keys (dim=-1): each query distributes a total weight of 1 (slide 35)."))


def test_attention_by_hand(student):
    """identity projections, 2 heads of size 1: each head is softmax(x_h x_h^T / sqrt(1)) x_h"""
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]])  # (B=1, n=3, d_model=2)
    res = _run(student, "MultiHeadAttention", {"d_model": 2, "n_heads": 2}, [{"args": [x, x, x]}],
               state_dict=_identity_state(2))[0]
    xs = x[0].numpy().astype(np.float64)
    expected = np.zeros((3, 2))
    for head in range(2):  # head h sees feature h only; d_k = 1, so sqrt(d_k) = 1 (slide 34)
        col = xs[:, head:head + 1]  # (3, 1)
        expected[:, head:head + 1] = _softmax(col @ col.T / math.sqrt(1)) @ col
    assert_close(_out(res, "MultiHeadAttention(2, 2)")[0], expected, what=tr("MultiHeadAttention(2, 2) with identity "
                                                                             "weights"), atol=1e-5, rtol=1e-5,
                 hint=tr("Head h gets the d_k columns h*d_k .. (h+1)*d_k of every token: split with view(B, n, "
                         "h, d_k).transpose(1, 2), scale by sqrt(d_k) (not sqrt(d_model)), merge heads back "
                         "before w_o."))


def test_mask_blocks_keys(student):
    """a 2-D mask (m, n): False keys get weight 0; True = may attend"""
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]])
    causal = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    res = _run(student, "MultiHeadAttention", {"d_model": 2, "n_heads": 1}, [{"args": [x, x, x, causal]}],
               state_dict=_identity_state(2))[0]
    w = _attn(res, "MultiHeadAttention")[0, 0]
    assert_close(w * ~causal.numpy(), np.zeros((3, 3)), what=tr("attn_weights at blocked keys"), atol=1e-7,
                 hint=tr("Put -inf in the scores where the mask is False, before the softmax (True = may attend)."))
    assert_close(_out(res, "MultiHeadAttention")[0, 0], x[0, 0].numpy(),
                 what=tr("output of query 0 (it may look only at key 0)"), atol=1e-6)


def test_fully_masked_row_is_zero(student):
    """a query that may attend to nothing gets zero weights and a zero context, not NaN"""
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]])
    mask = torch.tensor([[True, True, True], [False, False, False], [True, False, True]])
    res = _run(student, "MultiHeadAttention", {"d_model": 2, "n_heads": 1}, [{"args": [x, x, x, mask]}],
               state_dict=_identity_state(2))[0]
    out = _out(res, "MultiHeadAttention")
    if np.isnan(out).any():
        raise AssertionError(tr("a fully masked query row gives NaN (softmax of a row of -inf is 0/0); give it "
                                "zero weights instead"))
    assert_close(out[0, 1], np.zeros(2), what=tr("output of the fully masked query 1"), atol=1e-7)
    assert_close(_attn(res, "MultiHeadAttention")[0, 0, 1], np.zeros(3), what=tr("attn_weights of query 1"), atol=1e-7)


def test_encoder_layer_shape_and_norm(student):
    """EncoderLayer keeps (B, n, d_model) and ends with LayerNorm (post-LN)"""
    x = 3 * torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(1)) + 1
    res = _run(student, "EncoderLayer", {"d_model": 8, "n_heads": 2, "d_ff": 16}, [{"args": [x]}])[0]
    out = assert_shape(_out(res, "EncoderLayer(8, 2, 16)"), (2, 6, 8), tr("EncoderLayer output"))
    assert_close(out.mean(-1), np.zeros((2, 6)), what=tr("the mean of each token's output"), atol=1e-5,
                 hint=tr("Post-LN: the block ends with norm2(x + ffn(x)), so every token is normalised (slide "
                         "40)."))
    assert_close(out.var(-1), np.ones((2, 6)), what=tr("the variance of each token's output"), atol=1e-3,
                 hint=tr("Post-LN: the block ends with norm2(x + ffn(x)), so every token is normalised (slide "
                         "40)."))


def test_encoder_shapes_and_pe(student):
    """Encoder: (B, n) ids -> (B, n, d_model); pe is a float32 (max_len, d_model) sin/cos table"""
    init = {"vocab_size": 11, "d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 2, "max_len": 10}
    ids = torch.tensor([[3, 5, 7, 2, 0, 0], [4, 4, 9, 1, 6, 10]])
    res = _run(student, "Encoder", init, [{"args": [ids]}])[0]
    assert_shape(_out(res, "Encoder"), (2, 6, 8), tr("Encoder output for ids (2, 6)"))
    info = student.probe("structure", kind="Encoder", init=init)
    if "pe" not in info:
        raise AssertionError(tr("Encoder has no attribute `pe`; use self.register_buffer('pe', table)"))
    if info["pe_dtype"] != "float32":
        raise AssertionError(tr("Encoder.pe is {dtype}; the contract asks for float32",
                                dtype=info['pe_dtype']))
    pe = assert_shape(info["pe"], (10, 8), "Encoder(max_len=10, d_model=8).pe")
    assert_close(pe[0], [0, 1, 0, 1, 0, 1, 0, 1], what="pe[0] (position 0: sin 0 = 0, cos 0 = 1)", atol=1e-7)
    expected1 = [math.sin(1), math.cos(1), math.sin(1 / 10000 ** (2 / 8)), math.cos(1 / 10000 ** (2 / 8))]
    assert_close(pe[1, :4], expected1, what="pe[1, :4]", atol=1e-6,
                 hint=tr("PE[p, 2i] = sin(p / 10000^(2i/d_model)), PE[p, 2i+1] = cos(same angle) (slide 22)."))


def test_n_heads_must_divide_d_model(student):
    """MultiHeadAttention(10, 3) raises ValueError"""
    with raises_student(ValueError, "MultiHeadAttention(d_model=10, n_heads=3)"):
        student.probe("run", kind="MultiHeadAttention", init={"d_model": 10, "n_heads": 3})


def test_submodule_names(student):
    """the contract's submodule names: w_q, w_k, w_v, w_o; linear1, linear2; self_attn, ffn, norm1, norm2"""
    info = student.probe("structure", kind="EncoderLayer", init={"d_model": 8, "n_heads": 2, "d_ff": 16})
    expected = ["self_attn.w_q.weight", "self_attn.w_k.weight", "self_attn.w_v.weight", "self_attn.w_o.weight",
                "ffn.linear1.weight", "ffn.linear2.weight", "norm1.weight", "norm2.weight"]
    missing = [name for name in expected if name not in info["params"]]
    if missing:
        raise AssertionError(tr("EncoderLayer is missing the parameters {missing}; found {found}",
                                missing=missing, found=info['params']))
