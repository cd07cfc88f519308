"""Stand-in for stage 5 (a05_encoder), used while stages 6-7 are graded.

A student's stage-5 mistakes are charged once, in stage 5: when stage 5 lost
points and a later stage imports ``a05_encoder``, the worker gives it the
student's own module (or the starter's, if theirs cannot be imported) with the
contract names below replaced by these (grader/engine/earlier.py). It follows the contract of
``shared/spec/course-api.md`` (names, submodule names, parameter names and
shapes, masks True = may attend, fully masked rows -> zero weights and zero
context, dropout on the weights, ``attn_weights`` (B, h, m, n) detached and
before dropout, post-LN, scaled embedding + float32 sinusoidal buffer ``pe``)
but is assembled from torch's own pieces: ``F.scaled_dot_product_attention``,
``nn.Linear``, ``nn.LayerNorm``, ``nn.Embedding``. It never comes from the
reference solution.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

CONTRACT_NAMES = ["padding_mask", "MultiHeadAttention", "PositionwiseFeedForward", "EncoderLayer", "Encoder"]

_sdpa = F.scaled_dot_product_attention  # bound at import, before any guard wraps the name


def padding_mask(ids, pad_id):
    if ids.ndim != 2:
        raise ValueError(f"padding_mask: ids must be (B, n), got shape {tuple(ids.shape)}")
    return ids.ne(pad_id).unsqueeze(1).unsqueeze(1)


def _as_4d(mask, target):
    """mask of rank 2/3/4 -> rank 4 broadcastable to target (B, h, m, n), bool."""
    ranks = {2: lambda t: t.reshape(1, 1, *t.shape), 3: lambda t: t.unsqueeze(1), 4: lambda t: t}
    if mask.ndim not in ranks:
        raise ValueError(f"mask must be (m, n), (B, m, n) or (B, 1|h, m, n), got shape {tuple(mask.shape)}")
    mask4 = ranks[mask.ndim](mask)
    try:
        ok = torch.broadcast_shapes(tuple(mask4.shape), target) == target
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not broadcast to (B, h, m, n) = {target}")
    return mask4 if mask4.dtype == torch.bool else mask4.ne(0)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.dropout = nn.Dropout(dropout)
        self._saved = None  # (q, k, mask) of the last forward, detached
        self._weights = None

    @property
    def attn_weights(self):
        """Detached (B, h, m, n) weights of the last forward (after softmax, before dropout).

        Computed on first access from the saved queries and keys, as the attention
        of the identity matrix: softmax(q k^T / sqrt(d_k)) @ I.
        """
        if self._weights is None and self._saved is not None:
            q, k, mask, has_key = self._saved
            eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*k.shape[:-1], k.shape[-2])
            w = _sdpa(q, k, eye, attn_mask=mask)
            if has_key is not None:
                w = w.masked_fill(~has_key, 0.0)
            self._weights = w
        return self._weights

    @attn_weights.setter
    def attn_weights(self, value):
        self._weights, self._saved = value, None

    def _heads(self, x, proj):
        B, L, _ = x.shape
        return proj(x).reshape(B, L, self.n_heads, self.d_k).permute(0, 2, 1, 3)  # (B, h, L, d_k)

    def forward(self, query, key, value, mask=None):
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3:
            raise ValueError(
                f"query/key/value must be 3-D (B, L, d_model); got {tuple(query.shape)}, "
                f"{tuple(key.shape)}, {tuple(value.shape)}")
        if {query.shape[-1], key.shape[-1], value.shape[-1]} != {self.d_model} \
                or key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                f"shapes do not fit d_model={self.d_model}: query {tuple(query.shape)}, "
                f"key {tuple(key.shape)}, value {tuple(value.shape)}")
        B, m, n = query.shape[0], query.shape[1], key.shape[1]
        q, k, v = self._heads(query, self.w_q), self._heads(key, self.w_k), self._heads(value, self.w_v)
        has_key = None
        if mask is not None:
            mask = _as_4d(mask, (B, self.n_heads, m, n))
            has_key = mask.any(-1, keepdim=True)
            mask = mask | ~has_key  # a row with no allowed key attends everywhere, then is zeroed
        p = self.dropout.p if self.training else 0.0
        ctx = _sdpa(q, k, v, attn_mask=mask, dropout_p=p)  # (B, h, m, d_k)
        if has_key is not None:
            ctx = ctx.masked_fill(~has_key, 0.0)
        self._weights = None
        self._saved = (q.detach(), k.detach(), mask, has_key)
        return self.w_o(ctx.permute(0, 2, 1, 3).reshape(B, m, self.d_model))


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        acts = {"relu": F.relu, "gelu": F.gelu}
        if activation not in acts:
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self._act = acts[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.dropout(self._act(self.linear1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout(self.ffn(x)))


def _sinusoid_table(max_len, d_model):
    """(max_len, d_model) float32, evaluated in float64 (exp/log form of 10000^(-2i/d))."""
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)  # (max_len, ceil(d/2))
    table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # sin, cos, sin, cos, ...
    return table[:, :d_model].float()


class Encoder(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("pe", _sinusoid_table(max_len, d_model))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def forward(self, src_ids, src_mask=None):
        if src_ids.ndim != 2 or src_ids.shape[1] > self.pe.shape[0]:
            raise ValueError(f"src_ids must be (B, n) with n <= max_len={self.pe.shape[0]}, got {tuple(src_ids.shape)}")
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.pad_id)
        x = self.dropout(self.embedding(src_ids) * math.sqrt(self.d_model) + self.pe[: src_ids.shape[1]])
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
