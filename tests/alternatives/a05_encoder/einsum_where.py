"""Alternative correct stage 5: einsum for scores and context, torch.where for masks,
reshape/permute for the head split, PE from exp/log frequencies, functional activations."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def padding_mask(ids, pad_id):
    if ids.ndim != 2:
        raise ValueError(f"ids must have shape (B, n); got {list(ids.shape)}")
    B, n = ids.shape
    return (ids != pad_id).reshape(B, 1, 1, n)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads = d_model, n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attn_weights = None

    def split(self, x):
        B, L, _ = x.shape
        return x.reshape(B, L, self.n_heads, -1).permute(0, 2, 1, 3)  # (B, h, L, d_k)

    def forward(self, query, key, value, mask=None):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be (B, L, {self.d_model}); got {list(t.shape)}")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(f"mismatched shapes query {list(query.shape)}, key {list(key.shape)}, "
                             f"value {list(value.shape)}")
        B, m, n = query.shape[0], query.shape[1], key.shape[1]
        q, k, v = self.split(self.w_q(query)), self.split(self.w_k(key)), self.split(self.w_v(value))
        scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            if mask.ndim == 2:
                mask = mask.unsqueeze(0).unsqueeze(0)
            elif mask.ndim == 3:
                mask = mask.unsqueeze(1)
            elif mask.ndim != 4:
                raise ValueError(f"mask must be 2-D, 3-D or 4-D; got {list(mask.shape)}")
            full = (B, self.n_heads, m, n)
            if any(a not in (1, b) for a, b in zip(mask.shape, full)):
                raise ValueError(f"mask {list(mask.shape)} cannot broadcast to {list(full)}")
            mask = mask.bool()
            scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
            weights = torch.softmax(scores, dim=-1)
            weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
        else:
            weights = torch.softmax(scores, dim=-1)
        self.attn_weights = weights.detach()
        ctx = torch.einsum("bhij,bhjd->bihd", self.dropout(weights), v).reshape(B, m, self.d_model)
        return self.w_o(ctx)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation}")
        self.act = F.relu if activation == "relu" else F.gelu
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.act(self.linear1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        a = self.self_attn(x, x, x, mask=mask)
        x = self.norm1(x + self.dropout(a))
        f = self.ffn(x)
        return self.norm2(x + self.dropout(f))


class Encoder(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        pe = torch.empty(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq)[:, : d_model // 2]
        self.register_buffer("pe", pe.float())
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])

    def forward(self, src_ids, src_mask=None):
        if src_ids.ndim != 2:
            raise ValueError(f"src_ids must be (B, n); got {list(src_ids.shape)}")
        if src_ids.shape[1] > self.pe.shape[0]:
            raise ValueError(f"src_ids {list(src_ids.shape)} longer than max_len {self.pe.shape[0]}")
        mask = padding_mask(src_ids, self.pad_id) if src_mask is None else src_mask
        h = self.dropout(self.embedding(src_ids) * self.scale + self.pe[: src_ids.shape[1]])
        for layer in self.layers:
            h = layer(h, mask)
        return h
