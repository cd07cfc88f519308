"""Alternative stage 4: the PyTorch-tutorial construction exp(-2i ln(10000) / d), slice assignment, one_hot @ E."""
import math

import numpy as np


def _check_ids(ids, vocab_size):
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"ids must be a 1-D integer array, got shape {ids.shape} dtype {ids.dtype}")
    bad = (ids < 0) | (ids >= vocab_size)
    if bad.any():
        raise ValueError(f"id {ids[bad][0]} outside [0, {vocab_size})")
    return ids


def one_hot(ids, vocab_size):
    ids = _check_ids(ids, vocab_size)
    out = np.zeros((ids.shape[0], vocab_size))
    out[np.arange(ids.shape[0]), ids] = 1.0
    return out


def embed(ids, E):
    E = np.asarray(E, dtype=np.float64)
    if E.ndim != 2:
        raise ValueError(f"E must be 2-D, got {E.shape}")
    return one_hot(ids, E.shape[0]) @ E


def sinusoidal_positional_encoding(max_len, d_model):
    pe = np.zeros((max_len, d_model))
    position = np.arange(max_len, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term[: d_model // 2])
    return pe


def add_positional_encoding(X):
    X = np.asarray(X, dtype=np.float64)
    if X.ndim < 2:
        raise ValueError(f"X must be (..., n, d), got {X.shape}")
    return X + sinusoidal_positional_encoding(X.shape[-2], X.shape[-1])
