# Starter code, generated from the reference by `make starter`. Replace every
# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.
"""Stage 5: the Transformer encoder, in PyTorch (slides 30-40).

Stage 3 computed one attention head with numpy; here the same computation
becomes a trainable `nn.Module` that runs all heads of all tokens of a whole
batch at once (slide 38, "병렬 계산"), and is stacked into the encoder of the
original Transformer:

    ids (B, n) -> embedding * sqrt(d_model) + PE -> dropout           (slides 20-29)
               -> n_layers x [ self-attention -> Add & Norm
                               feed-forward   -> Add & Norm ]         (slides 30-40)
               -> (B, n, d_model)

Shapes used in the comments:
    B        batch size
    m        number of queries (tokens that ask)
    n        number of keys/values (tokens that are looked at); m == n in self-attention
    h        number of heads, d_k = d_model // h the size of one head
    d_model  width of every token representation

Masks are boolean and True where attention is allowed (the convention of the
whole course); a blocked score becomes -inf before the softmax.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def padding_mask(ids, pad_id):
    """Key mask that hides padding tokens (slide 35: who may be looked at).

    ids:    LongTensor (B, n) of token ids
    pad_id: the id used for padding
    returns BoolTensor (B, 1, 1, n), True at real tokens, False at padding.
    The two singleton axes broadcast over the heads and the queries, so every
    query ignores the same padded keys.
    """
    raise NotImplementedError('compare ids with pad_id and add two singleton axes -> (B, 1, 1, n)')


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
        raise NotImplementedError('check that n_heads divides d_model; create w_q, w_k, w_v, w_o and the dropout')

    def forward(self, query, key, value, mask=None):
        """Attend from every query to every key, all heads at once (slide 38).

        query: (B, m, d_model)   key, value: (B, n, d_model)
        mask:  bool, True = may attend; (m, n), (B, m, n) (same for every head)
               or (B, 1 or h, m, n); size-1 axes broadcast, e.g. padding_mask's (B, 1, 1, n)
        returns (B, m, d_model)

        A query row whose keys are all masked gets zero weights and a zero
        context (never NaN).
        """
        raise NotImplementedError('project, split heads with view(B, n, h, d_k).transpose(1, 2), mask with -inf, softmax, dropout, merge heads, w_o')

    def _check_shapes(self, query, key, value):
        """Raise ValueError unless query (B, m, d_model) and key, value (B, n, d_model); return B, m, n."""
        raise NotImplementedError('raise ValueError (naming the shapes) unless query is (B, m, d_model) and key, value are (B, n, d_model)')

    def _broadcast_mask(self, mask, B, m, n):
        """Bring a 2-D, 3-D or 4-D boolean mask to 4-D, broadcastable to (B, h, m, n).

        Raise ValueError (naming the shapes) for any other rank or a shape that does not broadcast.
        """
        raise NotImplementedError('add the missing leading axes ((m, n) -> (1, 1, m, n), (B, m, n) -> (B, 1, m, n)), check the shape, make it bool')


class PositionwiseFeedForward(nn.Module):
    """The position-wise feed-forward network of each encoder block (slide 40).

    The same two-layer MLP is applied to every token independently:
        (B, n, d_model) -linear1-> (B, n, d_ff) -activation, dropout-> -linear2-> (B, n, d_model)
    activation is "relu" (the original Transformer) or "gelu" (BERT, the exact erf form).
    """

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        raise NotImplementedError('linear1 (d_model -> d_ff), the activation ("relu" or "gelu"), dropout, linear2 (d_ff -> d_model)')

    def forward(self, x):
        """x: (B, n, d_model) -> (B, n, d_model)."""
        raise NotImplementedError('linear1, activation, dropout, linear2')


class EncoderLayer(nn.Module):
    """One encoder block, post-LN as in the original Transformer (slides 39-40).

        x = norm1(x + dropout(self_attn(x, x, x, mask)))   # Add & Norm (slides 39-40)
        x = norm2(x + dropout(ffn(x)))                      # Add & Norm

    Submodules: self_attn (MultiHeadAttention), ffn (PositionwiseFeedForward),
    norm1, norm2 (nn.LayerNorm(d_model, eps=layer_norm_eps)), dropout.
    """

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        raise NotImplementedError('create self_attn, ffn, norm1, norm2 and dropout')

    def forward(self, x, mask=None):
        """x: (B, n, d_model), mask as in MultiHeadAttention -> (B, n, d_model)."""
        raise NotImplementedError('self-attention sub-layer, then feed-forward sub-layer, each followed by Add & Norm (post-LN)')


def sinusoidal_encoding(max_len, d_model):
    """The sinusoidal positional encoding of stage 4 (slide 22), as a float32 tensor.

        PE[p, 2i]   = sin(p / 10000^(2i / d_model))
        PE[p, 2i+1] = cos(p / 10000^(2i / d_model))

    returns (max_len, d_model) float32. Computed in float64 and rounded once to
    float32, so every entry is the float32 nearest the exact value.
    """
    raise NotImplementedError('build the interleaved sin/cos table in float64, then convert it to float32')


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
        raise NotImplementedError('embedding (padding_idx=pad_id), register the float32 buffer pe, dropout, layers; keep pad_id')

    def forward(self, src_ids, src_mask=None):
        """src_ids: LongTensor (B, n); src_mask: None (= padding_mask(src_ids, pad_id)) or a mask
        as in MultiHeadAttention. returns (B, n, d_model)."""
        raise NotImplementedError('default mask, scaled embedding + pe[:n], dropout, then every layer')
