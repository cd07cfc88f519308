"""A correct stage 5 written from the contract, using the freedoms it leaves.

Upstream variant (tests/upstream/): graded on stage 5 and on every stage built on it
(6 and 7), where it must lose nothing. What the contract does not fix, and this
module does its own way:

* extra attributes: ``MultiHeadAttention.scale``, ``.heads``, ``Encoder.config``;
* extra buffers: a persistent ``scale_buffer`` in every attention (it shows in the
  state_dict) and a non-persistent ``positions`` in the Encoder;
* helpers of its own: ``split_heads``, ``merge_heads``, ``attend``, ``as_key_mask``,
  ``sinusoid_table`` (not the starter's ``sinusoidal_encoding``);
* a parameter-free submodule of its own (``EncoderLayer.residual``, ``Encoder.scale_in``);
* an additive mask and one fused softmax over keys, not masked_fill.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def padding_mask(ids, pad_id):
    if ids.dim() != 2:
        raise ValueError(f"padding_mask expects ids of shape (B, n), got {tuple(ids.shape)}")
    return (ids != pad_id).view(ids.shape[0], 1, 1, ids.shape[1])


def split_heads(x, heads):
    b, length, width = x.shape
    return x.view(b, length, heads, width // heads).transpose(1, 2)


def merge_heads(x):
    b, heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(b, length, heads * d_k)


def as_key_mask(mask, batch, heads, m, n):
    """Any allowed mask rank -> (B or 1, h or 1, m or 1, n) boolean, checked against the scores' shape."""
    if mask.dim() == 2:
        mask = mask[None, None]
    elif mask.dim() == 3:
        mask = mask[:, None]
    elif mask.dim() != 4:
        raise ValueError(f"mask must have 2, 3 or 4 dimensions, got shape {tuple(mask.shape)}")
    target = (batch, heads, m, n)
    for have, want in zip(mask.shape, target):
        if have not in (1, want):
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not fit scores of shape {target}")
    return mask.bool()


def attend(q, k, scale, mask):
    """The attention weights softmax(q k^T * scale) over the keys; a query with no allowed key gets zeros."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total > 0, total, torch.ones_like(total))
    return weights


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.heads = n_heads
        self.width = d_model
        self.scale = 1.0 / math.sqrt(d_model // n_heads)
        self.register_buffer("scale_buffer", torch.tensor(self.scale))
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)
        self.attn_weights = None

    def forward(self, query, key, value, mask=None):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.width:
                raise ValueError(f"{name} must be (B, L, {self.width}), got {tuple(t.shape)}")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value {tuple(value.shape)} "
                             "do not fit together")
        q = split_heads(self.w_q(query), self.heads)
        k = split_heads(self.w_k(key), self.heads)
        v = split_heads(self.w_v(value), self.heads)
        if mask is not None:
            mask = as_key_mask(mask, query.shape[0], self.heads, query.shape[1], key.shape[1])
        weights = attend(q, k, self.scale_buffer, mask)
        self.attn_weights = weights.detach()
        return self.w_o(merge_heads(torch.matmul(self.drop(weights), v)))


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = self.linear1(x)
        h = F.gelu(h) if self.activation == "gelu" else F.relu(h)
        return self.linear2(self.dropout(h))


class _Residual(nn.Module):
    """x + dropout(sub), then the given norm: a parameter-free submodule of this module's own."""

    def forward(self, x, sub, norm, dropout):
        return norm(x + dropout(sub))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.residual = _Residual()

    def forward(self, x, mask=None):
        x = self.residual(x, self.self_attn(x, x, x, mask), self.norm1, self.dropout)
        return self.residual(x, self.ffn(x), self.norm2, self.dropout)


def sinusoid_table(length, width):
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(width, dtype=torch.float64) // 2 * 2
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / width)
    even = torch.arange(width) % 2 == 0
    return torch.where(even, torch.sin(angle), torch.cos(angle)).to(torch.float32)


class _Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


class Encoder(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.config = {"vocab_size": vocab_size, "d_model": d_model, "n_layers": n_layers, "max_len": max_len}
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.scale_in = _Scale(math.sqrt(d_model))
        self.register_buffer("pe", sinusoid_table(max_len, d_model))
        self.register_buffer("positions", torch.arange(max_len), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])

    def forward(self, src_ids, src_mask=None):
        if src_ids.dim() != 2:
            raise ValueError(f"src_ids must be (B, n), got {tuple(src_ids.shape)}")
        n = src_ids.shape[1]
        if n > self.config["max_len"]:
            raise ValueError(f"{n} tokens but max_len={self.config['max_len']}")
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.pad_id)
        x = self.scale_in(self.embedding(src_ids)) + self.pe[self.positions[:n]]
        x = self.dropout(x)
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
