"""Stand-in for stage 7 (a07_bert_mlm), used while stages 8-9 are graded.

A student's stage-7 mistakes are charged once, in stage 7: when stage 7 lost
points and a later stage imports ``a07_bert_mlm``, the worker gives it the
student's own module (or, if that cannot be imported, the starter's) with the
contract names below replaced by these and the course-provided
``load_pretrained_bert`` by the starter's (see grader/engine/earlier.py). They
follow ``shared/spec/course-api.md``: the same submodule and parameter names
(``embeddings.word_embeddings``, ``embeddings.norm``, ``layers.i.self_attn.w_q`` ...,
``mlm_head.decoder`` tied to the word embeddings), attention_mask (B, n) 1/True at real tokens, exact GELU, LayerNorm
eps 1e-12. They are assembled from torch's own pieces (``nn.Embedding``,
``nn.LayerNorm``, ``F.cross_entropy``, ``torch.bernoulli``) and the stage-5
stand-in's ``EncoderLayer`` (itself ``F.scaled_dot_product_attention``), never
from the reference solution.
"""
import torch
import torch.nn.functional as F
from torch import nn

from .a05_encoder import EncoderLayer

CONTRACT_NAMES = ["BertEmbeddings", "BertModel", "BertForMaskedLM", "mask_tokens", "mlm_loss"]


def _need_2d(t, name):
    if t.ndim != 2:
        raise ValueError(f"{name} must be (B, n), got shape {tuple(t.shape)}")


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
        _need_2d(input_ids, "input_ids")
        n = input_ids.shape[1]
        if n > self.position_embeddings.num_embeddings:
            raise ValueError(f"input_ids {tuple(input_ids.shape)} is longer than "
                             f"max_position_embeddings={self.position_embeddings.num_embeddings}")
        if token_type_ids is None:
            token_type_ids = input_ids.new_zeros(input_ids.shape)
        elif token_type_ids.shape != input_ids.shape:
            raise ValueError(f"token_type_ids {tuple(token_type_ids.shape)} != input_ids {tuple(input_ids.shape)}")
        pos = self.position_embeddings.weight[:n].unsqueeze(0)  # (1, n, H)
        summed = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) + pos
        return self.dropout(self.norm(summed))


class BertModel(nn.Module):
    def __init__(self, vocab_size, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                 max_position_embeddings=512, type_vocab_size=2, dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        if num_heads < 1 or hidden_size % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide hidden_size={hidden_size}")
        self.hidden_size, self.pad_id = hidden_size, pad_id
        self.embeddings = BertEmbeddings(vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                                         dropout, layer_norm_eps, pad_id)
        self.layers = nn.ModuleList([
            EncoderLayer(hidden_size, num_heads, intermediate_size, dropout, "gelu", layer_norm_eps)
            for _ in range(num_layers)])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        _need_2d(input_ids, "input_ids")
        mask = None
        if attention_mask is not None:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask {tuple(attention_mask.shape)} != input_ids {tuple(input_ids.shape)}")
            mask = attention_mask.ne(0).unsqueeze(1).unsqueeze(1)  # (B, 1, 1, n)
        hidden = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            hidden = layer(hidden, mask)
        return hidden


def mask_tokens(input_ids, *, mask_id, vocab_size, special_ids, mlm_probability=0.15, generator=None):
    """BERT's masking in the style of Hugging Face's data collator: three Bernoulli draws."""
    _need_2d(input_ids, "input_ids")
    ids = input_ids.clone()
    labels = input_ids.clone()
    special = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    for s in special_ids:
        special |= ids.eq(int(s))
    prob = torch.full(ids.shape, float(mlm_probability), device=ids.device).masked_fill(special, 0.0)
    chosen = torch.bernoulli(prob, generator=generator).bool()
    labels[~chosen] = -100
    masked = torch.bernoulli(torch.full(ids.shape, 0.8, device=ids.device), generator=generator).bool() & chosen
    ids[masked] = mask_id
    swapped = torch.bernoulli(torch.full(ids.shape, 0.5, device=ids.device), generator=generator).bool()
    swapped &= chosen & ~masked
    ids[swapped] = torch.randint(0, vocab_size, ids.shape, dtype=ids.dtype, generator=generator,
                                 device=ids.device)[swapped]
    return ids, labels


class _MLMHead(nn.Module):
    def __init__(self, hidden_size, vocab_size, layer_norm_eps):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.decoder = nn.Linear(hidden_size, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden):
        return F.linear(self.norm(F.gelu(self.dense(hidden))), self.decoder.weight, self.bias)


class BertForMaskedLM(nn.Module):
    def __init__(self, vocab_size, **bert_kwargs):
        super().__init__()
        self.bert = BertModel(vocab_size, **bert_kwargs)
        self.mlm_head = _MLMHead(self.bert.hidden_size, vocab_size, bert_kwargs.get("layer_norm_eps", 1e-12))
        self.mlm_head.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        logits = self.mlm_head(self.bert(input_ids, attention_mask, token_type_ids))
        return (None if labels is None else mlm_loss(logits, labels)), logits


def mlm_loss(logits, labels):
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} do not fit logits {tuple(logits.shape)}")
    keep = labels.ne(-100)
    if not bool(keep.any()):
        return logits.sum() * 0.0  # no labelled position: zero, still differentiable
    return F.cross_entropy(logits[keep], labels[keep])
