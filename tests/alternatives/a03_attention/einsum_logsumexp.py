"""Alternative stage 3: np.einsum products, masked assignment, softmax through a log-sum-exp."""
import numpy as np


def _softmax_last(s):
    m = s.max(axis=-1, keepdims=True)
    dead = np.isneginf(m)                      # fully masked rows
    m[dead] = 0.0
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True))
    w = np.exp(s - np.where(dead, 0.0, lse))
    w[np.broadcast_to(dead, w.shape)] = 0.0
    return w


def attention_context(decoder_state, encoder_states):
    s = np.asarray(decoder_state, dtype=float)
    H = np.asarray(encoder_states, dtype=float)
    if s.ndim != 1 or H.ndim != 2 or H.shape[1] != s.shape[0]:
        raise ValueError(f"decoder_state {s.shape} / encoder_states {H.shape}")
    w = _softmax_last(np.einsum("nd,d->n", H, s))
    return np.einsum("n,nd->d", w, H), w


def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = (np.asarray(a, dtype=float) for a in (Q, K, V))
    if min(Q.ndim, K.ndim, V.ndim) < 2 or Q.shape[-1] != K.shape[-1] or K.shape[-2] != V.shape[-2]:
        raise ValueError(f"bad shapes Q {Q.shape}, K {K.shape}, V {V.shape}")
    try:
        lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"leading dims of Q {Q.shape}, K {K.shape}, V {V.shape} differ") from None
    scores = np.einsum("...md,...nd->...mn", Q, K) / np.sqrt(Q.shape[-1])
    scores = np.broadcast_to(scores, lead + scores.shape[-2:]).copy()
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        try:
            shape = np.broadcast_shapes(mask.shape, scores.shape)
        except ValueError:
            raise ValueError(f"mask {mask.shape} vs scores {scores.shape}") from None
        scores = np.broadcast_to(scores, shape).copy()
        scores[~np.broadcast_to(mask, shape)] = -np.inf
    w = _softmax_last(scores)
    return np.einsum("...mn,...nd->...md", w, V), w


def self_attention(X, W_q, W_k, W_v, mask=None):
    X = np.asarray(X, dtype=float)
    Ws = [np.asarray(W, dtype=float) for W in (W_q, W_k, W_v)]
    if X.ndim != 2 or any(W.ndim != 2 or W.shape[0] != X.shape[1] for W in Ws) or Ws[0].shape[1] != Ws[1].shape[1]:
        raise ValueError(f"X {X.shape}, W shapes {[W.shape for W in Ws]}")
    Q, K, V = (np.einsum("nd,dk->nk", X, W) for W in Ws)
    return scaled_dot_product_attention(Q, K, V, mask)
