"""A correct stage 7 written from the contract, using the freedoms it leaves.

Upstream variant (tests/upstream/): graded on stage 7 and on every stage built on it
(8 and 9), where it must lose nothing. What the contract does not fix, and this
module does its own way:

* an extra attribute, ``BertModel.config`` (a dict of its sizes), that its own
  ``load_pretrained_bert`` reads: the course-provided loader rewritten in its own style
  (one regular expression per name, ``load_state_dict`` of the mapped tensors);
* an extra persistent buffer, ``BertEmbeddings.position_ids`` (it shows in the state_dict);
* helpers of its own (``key_mask``, ``checked_ids``) and internal names of its own
  (``PredictionHead`` for the MLM head, ``IGNORED`` for -100);
* parameter-free submodules of its own (``BertModel.mask_builder``, ``PredictionHead.act``);
* mask_tokens from a single uniform draw per token and per decision.
"""
import json
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from a05_encoder import EncoderLayer

IGNORED = -100


def checked_ids(ids, name="input_ids"):
    if not torch.is_tensor(ids) or ids.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (B, n) tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    return ids


def key_mask(attention_mask, batch, length, device):
    """(B, n) 1/True at real tokens (None: all real) -> (B, 1, 1, n) boolean mask over keys."""
    if attention_mask is None:
        return torch.ones(batch, 1, 1, length, dtype=torch.bool, device=device)
    if tuple(attention_mask.shape) != (batch, length):
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must be (B, n) = {(batch, length)}")
    return attention_mask.ne(0).reshape(batch, 1, 1, length)


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_id)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("position_ids", torch.arange(max_position_embeddings))

    def forward(self, input_ids, token_type_ids=None):
        b, n = checked_ids(input_ids).shape
        if n > self.position_ids.numel():
            raise ValueError(f"{n} tokens but only {self.position_ids.numel()} positions")
        if token_type_ids is None:
            types = self.token_type_embeddings.weight[0].expand(b, n, -1)
        else:
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(f"token_type_ids {tuple(token_type_ids.shape)} != input_ids {(b, n)}")
            types = self.token_type_embeddings(token_type_ids)
        total = self.word_embeddings(input_ids) + types + self.position_embeddings(self.position_ids[:n])
        return self.dropout(self.norm(total))


class _MaskBuilder(nn.Module):
    def forward(self, attention_mask, input_ids):
        return key_mask(attention_mask, input_ids.shape[0], input_ids.shape[1], input_ids.device)


class BertModel(nn.Module):
    def __init__(self, vocab_size, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                 max_position_embeddings=512, type_vocab_size=2, dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads={num_heads}")
        self.config = {"vocab_size": vocab_size, "hidden_size": hidden_size, "num_hidden_layers": num_layers,
                       "num_attention_heads": num_heads, "intermediate_size": intermediate_size,
                       "max_position_embeddings": max_position_embeddings, "type_vocab_size": type_vocab_size}
        self.hidden_size = hidden_size
        self.pad_id = pad_id
        self.embeddings = BertEmbeddings(vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                                         dropout, layer_norm_eps, pad_id)
        self.mask_builder = _MaskBuilder()
        self.layers = nn.ModuleList([EncoderLayer(hidden_size, num_heads, intermediate_size, dropout, "gelu",
                                                  layer_norm_eps) for _ in range(num_layers)])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        mask = self.mask_builder(attention_mask, checked_ids(input_ids))
        hidden = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            hidden = layer(hidden, mask)
        return hidden


_RULES = [  # Hugging Face name -> this module's, applied in order
    (r"^(?:bert\.)?embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"^(?:bert\.)?embeddings\.", "embeddings."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.self\.query\.", r"layers.\1.self_attn.w_q."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.self\.key\.", r"layers.\1.self_attn.w_k."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.self\.value\.", r"layers.\1.self_attn.w_v."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.self_attn.w_o."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"layers.\1.norm1."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.ffn.linear1."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.ffn.linear2."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"layers.\1.norm2."),
]


def load_pretrained_bert(model, path):
    """The all-MiniLM-L6-v2 (Hugging Face BERT) checkpoint into this module's BertModel, checked
    against ``bert.config``; returns ``model``."""
    from safetensors.torch import load_file

    folder = Path(path)
    bert = getattr(model, "bert", model)
    hf = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    differ = {k: (v, hf[k]) for k, v in bert.config.items() if k in hf and hf[k] != v}
    if differ:
        raise ValueError(f"the checkpoint's sizes differ from the model's: {differ}")
    mapped = {}
    for name, tensor in load_file(str(folder / "model.safetensors")).items():
        if name.endswith("position_ids"):
            continue
        for pattern, replacement in _RULES:
            new, hits = re.subn(pattern, replacement, name)
            if hits:
                mapped[new] = tensor
                break
    result = bert.load_state_dict(mapped, strict=False)
    parameters = {n for n, _ in bert.named_parameters()}
    missing = [k for k in result.missing_keys if k in parameters]
    if missing or result.unexpected_keys:
        raise ValueError(f"checkpoint does not fit: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}")
    return model


def mask_tokens(input_ids, *, mask_id, vocab_size, special_ids, mlm_probability=0.15, generator=None):
    ids = checked_ids(input_ids)
    special = torch.zeros_like(ids, dtype=torch.bool)
    for s in special_ids:
        special |= ids == int(s)
    chosen = (torch.rand(ids.shape, generator=generator) < mlm_probability) & ~special
    decision = torch.rand(ids.shape, generator=generator)
    replacement = torch.randint(0, vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
    corrupted = torch.where(chosen & (decision < 0.8), torch.full_like(ids, mask_id), ids)
    corrupted = torch.where(chosen & (decision >= 0.8) & (decision < 0.9), replacement, corrupted)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORED))
    return corrupted, labels


class PredictionHead(nn.Module):
    def __init__(self, hidden_size, vocab_size, layer_norm_eps):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.decoder = nn.Linear(hidden_size, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden):
        return F.linear(self.norm(self.act(self.dense(hidden))), self.decoder.weight, self.bias)


class BertForMaskedLM(nn.Module):
    def __init__(self, vocab_size, **bert_kwargs):
        super().__init__()
        self.bert = BertModel(vocab_size, **bert_kwargs)
        self.mlm_head = PredictionHead(self.bert.hidden_size, vocab_size, bert_kwargs.get("layer_norm_eps", 1e-12))
        self.mlm_head.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        logits = self.mlm_head(self.bert(input_ids, attention_mask, token_type_ids))
        return (mlm_loss(logits, labels) if labels is not None else None), logits


def mlm_loss(logits, labels):
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} do not match logits {tuple(logits.shape)}")
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    keep = flat_labels != IGNORED
    if not keep.any():
        return (flat_logits * 0.0).sum()
    return F.cross_entropy(flat_logits[keep], flat_labels[keep])
