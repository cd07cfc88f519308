"""Stage 5 against torch's own Transformer modules (the oracle).

The reference solution (solutions/a05_encoder.py) and the stand-in used while
later stages are graded (grader/sandbox/standins/a05_encoder.py) must both
reproduce nn.MultiheadAttention and nn.TransformerEncoderLayer (batch_first,
post-norm) to 1e-5 with copied weights, with and without masks. torch's
boolean attention masks are True = blocked, ours True = may attend, so masks
are inverted on the way in.
"""
import pytest
import torch
from conftest import load_module
from oracles import copy_attention, copy_layer, no_fastpath  # noqa: F401 - no_fastpath is an autouse fixture
from torch import nn

ATOL = 1e-5

IMPLS = {
    "solution": load_module("solutions/a05_encoder.py", "_oracle_a05_solution"),
    "standin": load_module("grader/sandbox/standins/a05_encoder.py", "_oracle_a05_standin"),
}


def _max_diff(a, b):
    return (a - b).abs().max().item()


def _masks(B, h, m, n, gen):
    """(our mask, kwargs for torch): every rank our contract accepts. No fully masked row
    (torch gives NaN there; our contract gives zeros, checked separately)."""
    def allowed(*shape):
        mask = torch.rand(*shape, generator=gen) > 0.4
        mask[..., 0] = True  # at least one key per row
        return mask

    out = {"none": (None, {})}
    m2 = allowed(m, n)
    out["2d"] = (m2, {"attn_mask": ~m2})
    m3 = allowed(B, m, n)
    out["3d"] = (m3, {"attn_mask": (~m3).repeat_interleave(h, dim=0)})
    m4 = allowed(B, h, m, n)
    out["4d_heads"] = (m4, {"attn_mask": (~m4).reshape(B * h, m, n)})
    m41 = allowed(B, 1, m, n)
    out["4d_shared"] = (m41, {"attn_mask": (~m41).expand(B, h, m, n).reshape(B * h, m, n)})
    lengths = torch.tensor([n, n - 2, 1])[:B]
    key_ok = torch.arange(n)[None, :] < lengths[:, None]  # (B, n)
    out["padding"] = (key_ok[:, None, None, :], {"key_padding_mask": ~key_ok})
    return out


MASK_KINDS = ["none", "2d", "3d", "4d_heads", "4d_shared", "padding"]


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_attention_matches_nn_multiheadattention(impl, kind):
    mod = IMPLS[impl]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    B, m, n, d, h = 3, 5, 7, 16, 4
    ours = mod.MultiHeadAttention(d, h).eval()
    theirs = nn.MultiheadAttention(d, h, batch_first=True).eval()
    copy_attention(ours, theirs)
    q, k, v = torch.randn(B, m, d), torch.randn(B, n, d), torch.randn(B, n, d)
    mask, kw = _masks(B, h, m, n, gen)[kind]
    with torch.no_grad():
        out = ours(q, k, v, mask)
        ref, ref_w = theirs(q, k, v, need_weights=True, average_attn_weights=False, **kw)
        _, ref_avg = theirs(q, k, v, need_weights=True, average_attn_weights=True, **kw)
    assert _max_diff(out, ref) <= ATOL
    w = ours.attn_weights
    assert w.shape == (B, h, m, n)
    assert not w.requires_grad
    assert _max_diff(w, ref_w) <= ATOL
    assert _max_diff(w.mean(dim=1), ref_avg) <= ATOL


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("kind", ["none", "3d", "padding"])
def test_encoder_layer_matches_nn_transformerencoderlayer(impl, activation, kind):
    mod = IMPLS[impl]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(2)
    B, n, d, h, d_ff, eps = 3, 6, 16, 4, 40, 1e-6
    ours = mod.EncoderLayer(d, h, d_ff, activation=activation, layer_norm_eps=eps).eval()
    theirs = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, activation=activation,
                                        layer_norm_eps=eps, batch_first=True, norm_first=False).eval()
    copy_layer(ours, theirs)
    x = torch.randn(B, n, d)
    mask, kw = _masks(B, h, n, n, gen)[kind]
    kw = {"src_mask": kw["attn_mask"]} if "attn_mask" in kw else (
        {"src_key_padding_mask": kw["key_padding_mask"]} if kw else {})
    with torch.no_grad():
        out = ours(x, mask)
        ref = theirs(x, **kw)
    assert _max_diff(out, ref) <= ATOL


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_encoder_matches_torch_stack(impl):
    """Encoder = scaled embedding + sinusoidal table + torch's layers, padding mask by default."""
    mod = IMPLS[impl]
    torch.manual_seed(0)
    V, d, h, d_ff, L, pad = 30, 16, 4, 32, 2, 1
    ours = mod.Encoder(V, d, h, d_ff, L, max_len=20, pad_id=pad).eval()
    layers = [nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True).eval() for _ in range(L)]
    for a, b in zip(ours.layers, layers):
        copy_layer(a, b)
    ids = torch.randint(2, V, (2, 9))
    ids[0, 6:] = pad
    p = torch.arange(20, dtype=torch.float64)[:, None]
    i = torch.arange(d, dtype=torch.float64)
    angle = p / 10000.0 ** ((i - i % 2) / d)
    table = torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle))
    assert ours.pe.dtype == torch.float32 and ours.pe.shape == (20, d)
    assert _max_diff(ours.pe.double(), table) <= 1e-7
    assert ours.embedding.padding_idx == pad and ours.pad_id == pad
    with torch.no_grad():
        x = ours.embedding(ids) * d ** 0.5 + table[:9].float()
        for layer in layers:
            x = layer(x, src_key_padding_mask=ids == pad)
        out = ours(ids)
    real = ids != pad
    assert _max_diff(out[real], x[real]) <= ATOL


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_fully_masked_rows_give_zero_weights_and_context(impl):
    mod = IMPLS[impl]
    torch.manual_seed(0)
    attn = mod.MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 4, 8, requires_grad=True)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[1, 2] = False  # query 2 of sample 1 may look at nothing
    out = attn(x, x, x, mask)
    assert torch.isfinite(out).all()
    assert torch.allclose(out[1, 2], attn.w_o.bias)  # zero context -> only the output bias
    assert attn.attn_weights[1, :, 2].abs().max() == 0
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_state_dict_names_agree(impl):
    """The stand-in must be a drop-in for the reference: same parameter and buffer names and shapes."""
    torch.manual_seed(0)
    ref = IMPLS["solution"].Encoder(11, 8, 2, 16, 2, max_len=12).state_dict()
    got = IMPLS[impl].Encoder(11, 8, 2, 16, 2, max_len=12).state_dict()
    assert {k: tuple(v.shape) for k, v in got.items()} == {k: tuple(v.shape) for k, v in ref.items()}


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_dropout_in_train_mode_is_on_the_weights(impl):
    """Train mode: output changes between calls; attn_weights stay the undropped softmax."""
    mod = IMPLS[impl]
    torch.manual_seed(0)
    attn = mod.MultiHeadAttention(8, 2, dropout=0.5).train()
    x = torch.randn(2, 5, 8)
    a = attn(x, x, x)
    w = attn.attn_weights
    b = attn(x, x, x)
    assert not torch.allclose(a, b)
    assert torch.allclose(w.sum(-1), torch.ones(2, 2, 5), atol=1e-6)
    attn.eval()
    assert torch.allclose(attn(x, x, x), attn(x, x, x))
    assert torch.allclose(attn.attn_weights, w, atol=1e-6)


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("bad", ["n_heads", "rank", "d_model", "mask"])
def test_value_errors(impl, bad):
    mod = IMPLS[impl]
    with pytest.raises(ValueError):
        if bad == "n_heads":
            mod.MultiHeadAttention(10, 3)
        attn = mod.MultiHeadAttention(8, 2)
        x = torch.randn(2, 3, 8)
        if bad == "rank":
            attn(x[0], x[0], x[0])
        if bad == "d_model":
            attn(x, torch.randn(2, 3, 6), torch.randn(2, 3, 6))
        if bad == "mask":
            attn(x, x, x, torch.ones(2, 4, 3, dtype=torch.bool))
