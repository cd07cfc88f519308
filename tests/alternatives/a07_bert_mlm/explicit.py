"""Alternative correct stage 7, spelled out by hand.

Differences from the reference: positions sliced from the weight matrix, one
uniform draw per token decides both "picked?" and "mask / random / keep"
(conditioned on u < p, u / p is again uniform), the loss written with
log_softmax and gather, GELU as a module, and the tie made in the other
direction (the embedding takes the decoder's Parameter).
The course-provided `load_pretrained_bert` is not graded and is left out.
"""
import torch
from torch import nn

from a05_encoder import EncoderLayer


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_id)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids, token_type_ids=None):
        if input_ids.ndim != 2:
            raise ValueError(f"expected input_ids (B, n), got {tuple(input_ids.shape)}")
        n = input_ids.shape[1]
        if n > self.position_embeddings.num_embeddings:
            raise ValueError(f"{n} tokens but only {self.position_embeddings.num_embeddings} positions")
        x = self.word_embeddings(input_ids) + self.position_embeddings.weight[:n]
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.norm(x))


class BertModel(nn.Module):
    def __init__(self, vocab_size, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                 max_position_embeddings=512, type_vocab_size=2, dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError(f"{num_heads} heads do not divide hidden_size {hidden_size}")
        self.hidden_size, self.pad_id = hidden_size, pad_id
        self.embeddings = BertEmbeddings(vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                                         dropout=dropout, layer_norm_eps=layer_norm_eps, pad_id=pad_id)
        self.layers = nn.ModuleList([EncoderLayer(hidden_size, num_heads, intermediate_size, dropout, "gelu",
                                                  layer_norm_eps) for _ in range(num_layers)])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if input_ids.ndim != 2:
            raise ValueError(f"expected input_ids (B, n), got {tuple(input_ids.shape)}")
        B, n = input_ids.shape
        mask = None
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (B, n):
                raise ValueError(f"attention_mask {tuple(attention_mask.shape)} should be {(B, n)}")
            mask = attention_mask.to(torch.bool).view(B, 1, 1, n)
        h = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            h = layer(h, mask)
        return h


def mask_tokens(input_ids, *, mask_id, vocab_size, special_ids, mlm_probability=0.15, generator=None):
    u = torch.rand(input_ids.shape, generator=generator)
    ordinary = torch.ones_like(input_ids, dtype=torch.bool)
    for s in special_ids:
        ordinary &= input_ids != s
    picked = ordinary & (u < mlm_probability)
    v = u / max(mlm_probability, 1e-12)  # uniform on [0, 1) again where picked
    replacement = torch.randint(0, vocab_size, input_ids.shape, generator=generator).to(input_ids.dtype)
    out = input_ids.clone()
    out = torch.where(picked & (v < 0.8), torch.full_like(out, mask_id), out)
    out = torch.where(picked & (v >= 0.8) & (v < 0.9), replacement, out)
    labels = input_ids.masked_fill(~picked, -100)
    return out, labels


class MLMHead(nn.Module):
    def __init__(self, hidden_size, vocab_size, eps):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.decoder = nn.Linear(hidden_size, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, h):
        return self.norm(self.act(self.dense(h))) @ self.decoder.weight.T + self.bias


class BertForMaskedLM(nn.Module):
    def __init__(self, vocab_size, **kwargs):
        super().__init__()
        self.bert = BertModel(vocab_size, **kwargs)
        self.mlm_head = MLMHead(self.bert.hidden_size, vocab_size, kwargs.get("layer_norm_eps", 1e-12))
        self.bert.embeddings.word_embeddings.weight = self.mlm_head.decoder.weight

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        logits = self.mlm_head(self.bert(input_ids, attention_mask, token_type_ids))
        return (mlm_loss(logits, labels) if labels is not None else None), logits


def mlm_loss(logits, labels):
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} vs logits {tuple(logits.shape)}")
    keep = labels != -100
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / keep.sum().clamp(min=1)
