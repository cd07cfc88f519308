"""Alternative correct stage 6: arange-comparison causal mask, torch.cat shift, a sublayer helper,
the exp/log positional table, a fixed-length greedy loop that pads after EOS at the end."""
import math

import torch
import torch.nn as nn

from a05_encoder import Encoder, MultiHeadAttention, PositionwiseFeedForward, padding_mask


def causal_mask(n, device=None):
    i = torch.arange(n, device=device)
    return i[None, :] <= i[:, None]            # key index j <= query index i


def shift_right(tgt, bos_id):
    bos = torch.full_like(tgt[:, :1], bos_id)
    return torch.cat([bos, tgt[:, :-1]], dim=1)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model, eps=layer_norm_eps) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def _add_norm(self, x, norm, sub):
        return norm(x + self.dropout(sub))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if x.ndim != 3 or memory.ndim != 3 or x.shape[0] != memory.shape[0] or x.shape[2] != memory.shape[2]:
            raise ValueError(f"bad shapes: x {tuple(x.shape)}, memory {tuple(memory.shape)}")
        x = self._add_norm(x, self.norm1, self.self_attn(x, x, x, mask=tgt_mask))
        x = self._add_norm(x, self.norm2, self.cross_attn(x, memory, memory, mask=memory_mask))
        return self._add_norm(x, self.norm3, self.ffn(x))


def _table(max_len, d_model):
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv[None, :]
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = ang.sin()
    pe[:, 1::2] = ang.cos()[:, : d_model // 2]
    return pe.float()


class Decoder(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.pad_id, self.scale = pad_id, math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("pe", _table(max_len, d_model))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        if tgt_ids.ndim != 2 or tgt_ids.shape[1] > self.pe.shape[0]:
            raise ValueError(f"tgt_ids must be (B, m) with m <= {self.pe.shape[0]}, got {tuple(tgt_ids.shape)}")
        m = tgt_ids.shape[1]
        if tgt_mask is None:
            keys = (tgt_ids != self.pad_id)[:, None, None, :]
            tgt_mask = keys & causal_mask(m, tgt_ids.device)[None, None]
        h = self.dropout(self.embedding(tgt_ids) * self.scale + self.pe[:m])
        for layer in self.layers:
            h = layer(h, memory, tgt_mask, memory_mask)
        return h


class Seq2SeqTransformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, d_ff=512, n_layers=2,
                 max_len=512, dropout=0.1, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(src_vocab_size, d_model, n_heads, d_ff, n_layers, max_len=max_len,
                               dropout=dropout, pad_id=pad_id)
        self.decoder = Decoder(tgt_vocab_size, d_model, n_heads, d_ff, n_layers, max_len=max_len,
                               dropout=dropout, pad_id=pad_id)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src):
        return self.encoder(src)                  # its default mask is padding_mask(src, pad_id)

    def decode(self, tgt_in, memory, src_mask=None):
        return self.generator(self.decoder(tgt_in, memory, None, src_mask))

    def forward(self, src, tgt_in):
        if src.ndim != 2 or tgt_in.ndim != 2 or len(src) != len(tgt_in):
            raise ValueError(f"src {tuple(src.shape)} and tgt_in {tuple(tgt_in.shape)} must be (B, n), (B, m)")
        return self.decode(tgt_in, self.encode(src), padding_mask(src, self.pad_id))


@torch.no_grad()
def _greedy(model, src, bos_id, eos_id, max_len):
    memory = model.encode(src)
    mask = padding_mask(src, model.pad_id)
    ys = torch.full((len(src), 1), bos_id, dtype=torch.long)
    for _ in range(max_len - 1):
        nxt = model.decode(ys, memory, mask)[:, -1, :].max(dim=-1).indices
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        if (ys[:, 1:] == eos_id).any(dim=1).all():
            break
    # everything after the first EOS of a row becomes padding
    seen_eos = (ys == eos_id).long().cumsum(dim=1)
    after = (seen_eos - (ys == eos_id).long()) > 0
    after[:, 0] = False
    return ys.masked_fill(after, model.pad_id)


def greedy_decode(model, src, bos_id, eos_id, max_len):
    mode = model.training
    model.train(False)
    try:
        return _greedy(model, src, bos_id, eos_id, max_len)
    finally:
        model.train(mode)
