"""Alternative correct stage 6: triu-based mask, F.pad shift, masks built in Seq2SeqTransformer.decode,
a greedy loop over a list of columns that tracks the rows still alive."""

import torch
import torch.nn.functional as F
from torch import nn

from a05_encoder import Encoder, MultiHeadAttention, PositionwiseFeedForward, padding_mask


def causal_mask(n, device=None):
    return torch.ones(n, n, device=device).triu(diagonal=1) == 0


def shift_right(tgt, bos_id):
    return F.pad(tgt[..., :-1], (1, 0), value=bos_id)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model, layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        a = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(self.dropout(a) + x)
        c = self.cross_attn(x, memory, memory, memory_mask)   # the stand-in checks batch and width
        x = self.norm2(self.dropout(c) + x)
        return self.norm3(self.dropout(self.ffn(x)) + x)


class Decoder(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        p = torch.arange(max_len, dtype=torch.float64)[:, None]
        k = torch.arange(d_model, dtype=torch.float64)[None, :]
        angle = p / 10000.0 ** (2 * torch.div(k, 2, rounding_mode="floor") / d_model)
        pe = torch.where(k.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
        self.register_buffer("pe", pe.to(torch.float32))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(DecoderLayer(d_model, n_heads, d_ff, dropout))

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        if tgt_ids.dim() != 2:
            raise ValueError(f"tgt_ids must be 2-D (B, m), got {tuple(tgt_ids.shape)}")
        B, m = tgt_ids.shape
        if m > len(self.pe):
            raise ValueError(f"{m} target tokens but max_len is {len(self.pe)}")
        if memory.dim() != 3 or memory.shape[0] != B:
            raise ValueError(f"memory {tuple(memory.shape)} does not match tgt_ids {tuple(tgt_ids.shape)}")
        if tgt_mask is None:
            tgt_mask = causal_mask(m, tgt_ids.device).expand(B, 1, m, m) & padding_mask(tgt_ids, self.pad_id)
        x = self.embedding(tgt_ids) * self.d_model ** 0.5
        x = self.dropout(x + self.pe[:m].unsqueeze(0))
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
        return x


class Seq2SeqTransformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, d_ff=512, n_layers=2,
                 max_len=512, dropout=0.1, pad_id=0):
        super().__init__()
        self.encoder = Encoder(src_vocab_size, d_model, n_heads, d_ff, n_layers, max_len, dropout, pad_id)
        self.decoder = Decoder(tgt_vocab_size, d_model, n_heads, d_ff, n_layers, max_len, dropout, pad_id)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self.pad_id = pad_id

    def encode(self, src):
        return self.encoder(src, src_mask=padding_mask(src, self.pad_id))

    def decode(self, tgt_in, memory, src_mask=None):
        m = tgt_in.shape[-1]
        tgt_mask = causal_mask(m, tgt_in.device) & padding_mask(tgt_in, self.pad_id)   # explicit, same as default
        out = self.decoder(tgt_in, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
        return self.generator(out)

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        if tgt_in.dim() != 2 or tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"tgt_in {tuple(tgt_in.shape)} does not match src {tuple(src.shape)}")
        return self.decode(tgt_in, memory, src_mask=padding_mask(src, self.pad_id))


def greedy_decode(model, src, bos_id, eos_id, max_len):
    training = model.training
    model.eval()
    with torch.no_grad():
        memory = model.encode(src)
        src_mask = padding_mask(src, model.pad_id)
        columns = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
        alive = torch.ones(src.shape[0], dtype=torch.bool, device=src.device)
        while len(columns) < max_len and alive.any():
            logits = model.decode(torch.stack(columns, dim=1), memory, src_mask)
            token = torch.where(alive, logits[:, -1].argmax(-1), torch.full_like(alive, model.pad_id, dtype=torch.long))
            columns.append(token)
            alive = alive & (token != eos_id)
    model.train(training)
    return torch.stack(columns, dim=1)
