"""Alternative stage 3: scale Q first, broadcast-multiply-and-sum products, a Python loop in the LSTM attention."""
import math

import numpy as np


def softmax_rows(s):
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(top == -np.inf, 0.0, top)
    e = np.exp(s - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0.0, 1.0, total)


def attention_context(decoder_state, encoder_states):
    s = np.array(decoder_state, dtype=np.float64)
    H = np.array(encoder_states, dtype=np.float64)
    if s.ndim != 1 or H.ndim != 2 or H.shape[1] != len(s):
        raise ValueError(f"decoder_state {s.shape} does not match encoder_states {H.shape}")
    scores = np.array([sum(a * b for a, b in zip(h, s)) for h in H])   # one dot product per state (slide 13)
    weights = softmax_rows(scores)
    context = np.zeros_like(s)
    for w_j, h_j in zip(weights, H):                                      # weighted sum (slide 15)
        context = context + w_j * h_j
    return context, weights


def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = np.array(Q, dtype=np.float64), np.array(K, dtype=np.float64), np.array(V, dtype=np.float64)
    if Q.ndim < 2 or K.ndim < 2 or V.ndim < 2:
        raise ValueError(f"Q {Q.shape}, K {K.shape}, V {V.shape} must be at least 2-D")
    if Q.shape[-1] != K.shape[-1] or K.shape[-2] != V.shape[-2]:
        raise ValueError(f"Q {Q.shape}, K {K.shape}, V {V.shape} do not fit together")
    Qs = Q / math.sqrt(Q.shape[-1])
    try:
        scores = (Qs[..., :, None, :] * K[..., None, :, :]).sum(axis=-1)
        if mask is not None:
            scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
        weights = softmax_rows(scores)
        out = (weights[..., :, :, None] * V[..., None, :, :]).sum(axis=-2)
    except ValueError as exc:
        mshape = None if mask is None else np.shape(mask)
        raise ValueError(f"shapes Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mshape} do not broadcast: "
                         f"{exc}") from None
    return out, weights


def self_attention(X, W_q, W_k, W_v, mask=None):
    X = np.array(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be (n, d_model), got {X.shape}")
    for W in (W_q, W_k, W_v):
        if np.ndim(W) != 2 or np.shape(W)[0] != X.shape[1]:
            raise ValueError(f"projection of shape {np.shape(W)} does not fit X {X.shape}")
    if np.shape(W_q)[1] != np.shape(W_k)[1]:
        raise ValueError(f"W_q {np.shape(W_q)} and W_k {np.shape(W_k)} disagree on d_k")
    return scaled_dot_product_attention(np.dot(X, W_q), np.dot(X, W_k), np.dot(X, W_v), mask)
