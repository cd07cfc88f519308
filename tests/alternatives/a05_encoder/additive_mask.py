"""Alternative correct stage 5: an additive float mask (0 / -inf) built once, matmul on
contiguous per-head tensors, a (B*h) flattened batch for the matmuls, a per-row guard
for fully masked rows, and a PE table from numpy in float64 (stage 4 style)."""
import math

import numpy as np
import torch
from torch import nn


def padding_mask(ids, pad_id):
    if ids.dim() != 2:
        raise ValueError("ids must be 2-D (B, n), got shape " + str(tuple(ids.shape)))
    return ids.ne(pad_id)[:, None, None, :]


def _pe_table(max_len, d_model):
    p = np.arange(max_len)[:, None]
    i = np.arange(d_model)[None, :]
    angle = p / np.power(10000.0, (2 * (i // 2)) / d_model)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle))  # float64


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(f"cannot split d_model={d_model} into n_heads={n_heads} heads")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attn_weights = None

    def forward(self, query, key, value, mask=None):
        if not (query.dim() == key.dim() == value.dim() == 3):
            raise ValueError(f"expected 3-D inputs, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        B, m, dq = query.shape
        Bk, n, dk = key.shape
        if dq != self.d_model or dk != self.d_model or value.shape != key.shape or Bk != B:
            raise ValueError(f"bad shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)} "
                             f"for d_model={self.d_model}")
        h, d_k = self.n_heads, self.d_k
        q = self.w_q(query).view(B, m, h, d_k).transpose(1, 2).reshape(B * h, m, d_k)
        k = self.w_k(key).view(B, n, h, d_k).transpose(1, 2).reshape(B * h, n, d_k)
        v = self.w_v(value).view(B, n, h, d_k).transpose(1, 2).reshape(B * h, n, d_k)
        scores = torch.bmm(q * (1.0 / math.sqrt(d_k)), k.transpose(1, 2)).view(B, h, m, n)
        dead = None
        if mask is not None:
            if mask.dim() not in (2, 3, 4):
                raise ValueError(f"mask rank must be 2, 3 or 4, got shape {tuple(mask.shape)}")
            mask4 = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape)) if mask.dim() != 3 else mask[:, None]
            try:
                mask4 = mask4.expand(B, h, m, n)
            except RuntimeError:
                raise ValueError(f"mask shape {tuple(mask.shape)} incompatible with {(B, h, m, n)}") from None
            mask4 = mask4.to(torch.bool)
            dead = ~mask4.any(-1, keepdim=True)
            additive = torch.zeros(B, h, m, n, dtype=scores.dtype).masked_fill(~mask4 & ~dead, float("-inf"))
            scores = scores + additive
        weights = scores.softmax(-1)
        if dead is not None:
            weights = weights * (~dead)
        self.attn_weights = weights.detach()
        ctx = torch.bmm(self.dropout(weights).reshape(B * h, m, n), v)  # (B*h, m, d_k)
        ctx = ctx.view(B, h, m, d_k).transpose(1, 2).reshape(B, m, self.d_model)
        return self.w_o(ctx)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = {"relu": nn.ReLU, "gelu": nn.GELU}[activation]()

    def forward(self, x):
        x = self.activation(self.linear1(x))
        return self.linear2(self.dropout(x))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))
        x = self.norm2(x + self.dropout(self.ffn(x)))
        return x


class Encoder(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("pe", torch.from_numpy(_pe_table(max_len, d_model)).to(torch.float32))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))

    def forward(self, src_ids, src_mask=None):
        if src_ids.dim() != 2 or src_ids.size(1) > self.pe.size(0):
            raise ValueError(f"src_ids must be (B, n<= {self.pe.size(0)}), got {tuple(src_ids.shape)}")
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.pad_id)
        n = src_ids.size(1)
        x = self.embedding(src_ids) * math.sqrt(self.d_model)
        x = self.dropout(x + self.pe[:n].unsqueeze(0))
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
