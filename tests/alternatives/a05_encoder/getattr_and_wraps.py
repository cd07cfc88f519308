"""Alternative correct stage 5 that uses getattr and functools.wraps the way correct code does (issue 33):
projections made and used by name with setattr/getattr on self and on a loop over literal names, torch.softmax
looked up with a literal getattr, and shape checks in a decorator written with functools.wraps. None of it
reaches around the grader's rules, so it must keep full marks."""
import functools
import math

import torch
from torch import nn


def _two_dimensional(fn):
    """Checks that the ids a function gets are (B, n)."""
    @functools.wraps(fn)
    def checked(ids, *args, **kwargs):
        if ids.ndim != 2:
            raise ValueError(f"{fn.__name__}: ids must be (B, n), got shape {tuple(ids.shape)}")
        return fn(ids, *args, **kwargs)
    return checked


@_two_dimensional
def padding_mask(ids, pad_id):
    """Key mask that hides padding tokens (slide 35: who may be looked at).

    ids:    LongTensor (B, n) of token ids
    pad_id: the id used for padding
    returns BoolTensor (B, 1, 1, n), True at real tokens, False at padding.
    The two singleton axes broadcast over the heads and the queries, so every
    query ignores the same padded keys.
    """
    if ids.dim() != 2:
        raise ValueError(f"padding_mask expects ids of shape (B, n), got {tuple(ids.shape)}")
    return (ids != pad_id)[:, None, None, :]  # (B, 1, 1, n)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (slides 32-38, formula of slide 5).

    Each head h looks at its own d_k = d_model // n_heads slice of the projected
    queries, keys and values:

        head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h          (slides 34-36)
        out    = concat(head_1, ..., head_h) W_o

    Submodules: w_q, w_k, w_v, w_o, each nn.Linear(d_model, d_model, bias=bias)
    (slides 32-33: one shared projection applied to every token, slide 37),
    and `dropout`, applied to the attention weights.
    After every forward, `self.attn_weights` holds the detached weights
    (B, h, m, n) after the softmax and before dropout.
    """

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))
        self.dropout = nn.Dropout(dropout)
        self.attn_weights = None

    def forward(self, query, key, value, mask=None):
        """Attend from every query to every key, all heads at once (slide 38).

        query: (B, m, d_model)   key, value: (B, n, d_model)
        mask:  bool, True = may attend; (m, n), (B, m, n) (same for every head)
               or (B, 1 or h, m, n); size-1 axes broadcast, e.g. padding_mask's (B, 1, 1, n)
        returns (B, m, d_model)

        A query row whose keys are all masked gets zero weights and a zero
        context (never NaN).
        """
        B, m, n = self._check_shapes(query, key, value)
        h, d_k = self.n_heads, self.d_k

        # project, then split d_model into h heads of size d_k (slides 32-33)
        q, k, v = (getattr(self, name)(x).view(B, length, h, d_k).transpose(1, 2)
                   for name, x, length in (("w_q", query, m), ("w_k", key, n), ("w_v", value, n)))

        # every query against every key, scaled by sqrt(d_k) (slide 34); scaling the queries
        # (B, h, m, d_k) first gives the same scores as scaling the (B, h, m, n) product, for less work
        q = q / math.sqrt(d_k)
        scores = q @ k.transpose(-2, -1)  # (B, h, m, n)

        if mask is not None:
            mask = self._broadcast_mask(mask, B, m, n)  # (B|1, h|1, m|1, n), True = attend
            # a query that may attend to no key at all would get a row of -inf and
            # softmax would give 0/0 = NaN: keep that row finite, zero its weights below
            has_key = mask.any(dim=-1, keepdim=True)  # (B|1, h|1, m|1, 1)
            scores = scores.masked_fill(~mask, float("-inf"))  # blocked before the softmax
            scores = scores.masked_fill(~has_key, 0.0)

        weights = getattr(torch, "softmax")(scores, dim=-1)  # noqa: B009 - a literal getattr, on purpose
        if mask is not None:
            weights = weights.masked_fill(~has_key, 0.0)  # fully masked rows: zero weights

        self.attn_weights = weights.detach()  # kept for inspection, before dropout
        weights = self.dropout(weights)

        # weighted sum of values (slide 36), then merge heads back to d_model
        context = weights @ v  # (B, h, m, d_k)
        context = context.transpose(1, 2).contiguous().view(B, m, self.d_model)  # (B, m, d_model)
        return self.w_o(context)

    def _check_shapes(self, query, key, value):
        """Raise ValueError unless query (B, m, d_model) and key, value (B, n, d_model); return B, m, n."""
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError(
                "query, key and value must be (B, length, d_model); got "
                f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        d = self.d_model
        if query.shape[-1] != d or key.shape[-1] != d or value.shape[-1] != d:
            raise ValueError(
                f"last axis must be d_model={d}; got query {tuple(query.shape)}, "
                f"key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                "key and value must share (B, n) and the batch size of query; got "
                f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        return query.shape[0], query.shape[1], key.shape[1]

    def _broadcast_mask(self, mask, B, m, n):
        """Bring a 2-D, 3-D or 4-D boolean mask to 4-D, broadcastable to (B, h, m, n).

        Raise ValueError (naming the shapes) for any other rank or a shape that does not broadcast.
        """
        if mask.dim() == 2:  # (m, n): the same for the whole batch and every head
            mask = mask[None, None]
        elif mask.dim() == 3:  # (B, m, n): the same for every head
            mask = mask[:, None]
        elif mask.dim() != 4:
            raise ValueError(
                f"mask must be (m, n), (B, m, n) or (B, 1 or h, m, n); got {tuple(mask.shape)}"
            )
        target = (B, self.n_heads, m, n)
        if any(s != 1 and s != t for s, t in zip(mask.shape, target)):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to (B, h, m, n) = {target}"
            )
        if mask.dtype != torch.bool:
            mask = mask != 0
        return mask


class PositionwiseFeedForward(nn.Module):
    """The position-wise feed-forward network of each encoder block (slide 40).

    The same two-layer MLP is applied to every token independently:
        (B, n, d_model) -linear1-> (B, n, d_ff) -activation, dropout-> -linear2-> (B, n, d_model)
    activation is "relu" (the original Transformer) or "gelu" (BERT, the exact erf form).
    """

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f'activation must be "relu" or "gelu", got {activation!r}')
        self.linear1 = nn.Linear(d_model, d_ff)
        self.activation = nn.ReLU() if activation == "relu" else nn.GELU()  # exact erf GELU
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        """x: (B, n, d_model) -> (B, n, d_model)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class EncoderLayer(nn.Module):
    """One encoder block, post-LN as in the original Transformer (slides 39-40).

        x = norm1(x + dropout(self_attn(x, x, x, mask)))   # Add & Norm (slides 39-40)
        x = norm2(x + dropout(ffn(x)))                      # Add & Norm

    Submodules: self_attn (MultiHeadAttention), ffn (PositionwiseFeedForward),
    norm1, norm2 (nn.LayerNorm(d_model, eps=layer_norm_eps)), dropout.
    """

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        """x: (B, n, d_model), mask as in MultiHeadAttention -> (B, n, d_model)."""
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))  # (B, n, d_model)
        x = self.norm2(x + self.dropout(self.ffn(x)))  # (B, n, d_model)
        return x


def sinusoidal_encoding(max_len, d_model):
    """The sinusoidal positional encoding of stage 4 (slide 22), as a float32 tensor.

        PE[p, 2i]   = sin(p / 10000^(2i / d_model))
        PE[p, 2i+1] = cos(p / 10000^(2i / d_model))

    returns (max_len, d_model) float32. Computed in float64 and rounded once to
    float32, so every entry is the float32 nearest the exact value.
    """
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model / 2),)
    angle = position / 10000.0 ** (two_i / d_model)  # (max_len, ceil(d_model / 2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd d_model: one cos column fewer
    return pe.to(torch.float32)


class Encoder(nn.Module):
    """The Transformer encoder: embeddings + positions + a stack of EncoderLayer (slides 20-40).

        x = embedding(src_ids) * sqrt(d_model) + pe[:n]    (B, n, d_model)  slides 20, 26
        x = dropout(x)
        x = layer(x, src_mask) for each layer in layers     slide 40: blocks are stacked

    Attributes: embedding (nn.Embedding with padding_idx=pad_id), buffer pe
    (max_len, d_model) float32, dropout, layers (nn.ModuleList of EncoderLayer), pad_id.
    """

    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len=512, dropout=0.0, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))  # (max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [EncoderLayer(d_model, n_heads, d_ff, dropout=dropout) for _ in range(n_layers)]
        )

    def forward(self, src_ids, src_mask=None):
        """src_ids: LongTensor (B, n); src_mask: None (= padding_mask(src_ids, pad_id)) or a mask
        as in MultiHeadAttention. returns (B, n, d_model)."""
        if src_ids.dim() != 2:
            raise ValueError(f"src_ids must be (B, n), got {tuple(src_ids.shape)}")
        n = src_ids.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError(f"sequence length {n} exceeds max_len={self.pe.shape[0]} (src_ids {tuple(src_ids.shape)})")
        if src_mask is None:
            src_mask = padding_mask(src_ids, self.pad_id)  # (B, 1, 1, n)
        x = self.embedding(src_ids) * math.sqrt(self.d_model) + self.pe[:n]  # (B, n, d_model)
        x = self.dropout(x)
        for layer in self.layers:
            x = layer(x, src_mask)
        return x
