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
    # BEGIN SOLUTION: repeat your stage-2 softmax here (stages do not import each other): max-shift, exp, divide; all -inf slice -> zeros
    # In place, on x itself: the callers pass fresh scores they no longer need, and attention
    # scores are large (batch x heads x m x n numbers), so every copy would cost time.
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max[~np.isfinite(x_max)] = 0.0    # all -inf slice: shift by 0 (-inf - (-inf) would be NaN)
    x -= x_max
    np.exp(x, out=x)
    total = np.sum(x, axis=axis, keepdims=True)
    total[total == 0] = np.inf          # all -inf slice: 0 / inf = 0 (0 / 0 would be NaN)
    x /= total
    return x
    # END SOLUTION


def attention_context(decoder_state, encoder_states):
    """Attention of the LSTM encoder-decoder (slides 11-15).

    decoder_state:  (d,)     the current decoder state (the Query)
    encoder_states: (n, d)   one state per input word (Keys and Values at once)
    returns (context (d,), weights (n,)):
        scores  = encoder_states @ decoder_state   unscaled dot products (slides 12-13)
        weights = softmax(scores)                  (slide 14)
        context = sum_j weights[j] * encoder_states[j]   weighted sum (slide 15)
    """
    # BEGIN SOLUTION: check shapes; scores = dot of the decoder state with each encoder state (no scaling), softmax, weighted sum of encoder states
    decoder_state = np.asarray(decoder_state, dtype=np.float64)
    encoder_states = np.asarray(encoder_states, dtype=np.float64)
    if decoder_state.ndim != 1 or encoder_states.ndim != 2 or encoder_states.shape[1] != decoder_state.shape[0]:
        raise ValueError(
            f"expected decoder_state (d,) and encoder_states (n, d), "
            f"got {decoder_state.shape} and {encoder_states.shape}"
        )
    scores = encoder_states @ decoder_state      # (n,)
    weights = _softmax(scores)                   # (n,)
    context = weights @ encoder_states           # (d,)
    return context, weights
    # END SOLUTION


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
    # BEGIN SOLUTION: check shapes; scores = Q @ K^T (last two axes) / sqrt(d_k); blocked -> -inf; softmax over keys (last axis); weights @ V
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    if Q.ndim < 2 or K.ndim < 2 or V.ndim < 2:
        raise ValueError(f"Q, K, V need at least 2 dimensions, got shapes {Q.shape}, {K.shape}, {V.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q {Q.shape} and K {K.shape} must have the same last dimension d_k")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K {K.shape} and V {V.shape} must have the same number of rows n")
    try:
        np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"leading dimensions of Q {Q.shape}, K {K.shape}, V {V.shape} do not broadcast") from None

    d_k = Q.shape[-1]
    # Dividing the queries (..., m, d_k) by sqrt(d_k) gives the same scores as dividing
    # Q K^T (..., m, n) afterwards, with m x d_k divisions instead of m x n.
    Q = Q / np.sqrt(d_k)
    scores = Q @ np.swapaxes(K, -1, -2)                             # (..., m, n)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
        try:
            np.broadcast_shapes(mask.shape, scores.shape)
        except ValueError:
            raise ValueError(f"mask {mask.shape} does not broadcast to the scores {scores.shape}") from None
        scores = np.where(mask, scores, -np.inf)
    weights = _softmax(scores, axis=-1)                             # over the keys
    return weights @ V, weights
    # END SOLUTION


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
    # BEGIN SOLUTION: check shapes; Q = X @ W_q, K = X @ W_k, V = X @ W_v, then call scaled_dot_product_attention
    X = np.asarray(X, dtype=np.float64)
    W_q, W_k, W_v = (np.asarray(W, dtype=np.float64) for W in (W_q, W_k, W_v))
    if X.ndim < 2:
        raise ValueError(f"X must be (n, d_model), got shape {X.shape}")
    d_model = X.shape[-1]
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        if W.ndim != 2 or W.shape[0] != d_model:
            raise ValueError(f"{name} must be (d_model={d_model}, _) to match X {X.shape}, got {W.shape}")
    if W_q.shape[1] != W_k.shape[1]:
        raise ValueError(f"W_q {W_q.shape} and W_k {W_k.shape} must produce the same d_k")
    Q = X @ W_q      # (n, d_k)
    K = X @ W_k      # (n, d_k)
    V = X @ W_v      # (n, d_v)
    return scaled_dot_product_attention(Q, K, V, mask)
    # END SOLUTION
