# Starter code, generated from the reference by `make starter`. Replace every
# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.
"""Stage 3 - attention: from the LSTM decoder to scaled dot-product attention.

Three steps, the same everywhere in the lecture (slides 11-15, 34-36):

1. similarity: compare what we look for (Query) with every candidate (Key)
   by a dot product, one score per candidate (slides 12-13, 34);
2. softmax: turn the scores into positive weights that sum to 1 (slides 14, 35);
3. weighted sum: multiply every Value by its weight and add them up
   (slides 15, 36). The output is a blend of *all* Values, not the single
   best one (slide 6).

The Transformer divides the scores by sqrt(d_k), the Key dimension, before
the softmax (slides 5, 34), and computes all queries at once with matrix
products (slide 38).

Masks are boolean and True where attention is allowed; a blocked score
becomes -inf before the softmax, so it gets weight exactly 0. A query row
with every key blocked gets all-zero weights and a zero output, never NaN.

This stage is self-contained: it does not import stage 2, it repeats the
softmax below.
"""

import numpy as np


def _softmax(x, axis=-1):
    """Stable softmax along `axis`; an all -inf slice gives zeros (stage 2, slide 14).

    x: any shape -> same shape.
    """
    raise NotImplementedError('repeat your stage-2 softmax here (stages do not import each other): max-shift, exp, divide; all -inf slice -> zeros')


def attention_context(decoder_state, encoder_states):
    """Attention of the LSTM encoder-decoder (slides 11-15).

    decoder_state:  (d,)     the current decoder state (the Query)
    encoder_states: (n, d)   one state per input word (Keys and Values at once)
    returns (context (d,), weights (n,)):
        scores  = encoder_states @ decoder_state   unscaled dot products (slides 12-13)
        weights = softmax(scores)                  (slide 14)
        context = sum_j weights[j] * encoder_states[j]   weighted sum (slide 15)
    """
    raise NotImplementedError('check shapes; scores = dot of the decoder state with each encoder state (no scaling), softmax, weighted sum of encoder states')


def scaled_dot_product_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V, all queries at once (slides 5, 34-38).

    Q:    (..., m, d_k)   m queries
    K:    (..., n, d_k)   n keys
    V:    (..., n, d_v)   one value per key
    mask: optional boolean array broadcastable to (..., m, n); True = may attend.
          Blocked scores become -inf before the softmax.
    Leading dimensions (batch, heads, ...) broadcast.
    returns (out (..., m, d_v), weights (..., m, n)); each weights row sums to 1,
    or is all zeros (and its out row too) when the whole row is masked.
    """
    raise NotImplementedError('check shapes; scores = Q @ K^T (last two axes) / sqrt(d_k); blocked -> -inf; softmax over keys (last axis); weights @ V')


def self_attention(X, W_q, W_k, W_v, mask=None):
    """Self-attention of one sequence with itself (slides 30-38).

    X:   (n, d_model)    token representations (embedding + position, slide 29)
    W_q: (d_model, d_k)  Query projection (slide 32)
    W_k: (d_model, d_k)  Key projection (slide 33)
    W_v: (d_model, d_v)  Value projection (slide 36)
    mask: optional boolean, broadcastable to (n, n); True = may attend.
    The same three matrices are shared by every token (slide 37).
    returns (out (n, d_v), weights (n, n)) of scaled_dot_product_attention(X W_q, X W_k, X W_v).
    """
    raise NotImplementedError('check shapes; Q = X @ W_q, K = X @ W_k, V = X @ W_v, then call scaled_dot_product_attention')
