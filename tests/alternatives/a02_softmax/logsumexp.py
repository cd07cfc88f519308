"""Alternative stage 2: everything through a log-sum-exp; softmax = exp(x - logsumexp(x))."""
import numpy as np


def _logsumexp(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0                      # masked assignment instead of np.where
    with np.errstate(divide="ignore"):
        return m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    lse = _logsumexp(x, axis)                     # -inf on an all -inf slice
    out = np.zeros_like(x)
    ok = np.broadcast_to(np.isfinite(lse), x.shape)
    with np.errstate(invalid="ignore"):
        out[ok] = np.exp((x - lse)[ok])
    return out


def log_softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    lse = _logsumexp(x, axis)
    with np.errstate(invalid="ignore"):
        out = x - lse
    out[np.isneginf(x)] = -np.inf                 # also covers the all -inf slice (NaN there)
    return out
