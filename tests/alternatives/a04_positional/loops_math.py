"""Alternative stage 4: Python loops with math.sin/math.cos, comparison-based one_hot, np.take for embed."""
import math

import numpy as np


def one_hot(ids, vocab_size):
    ids = np.array(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be (n,), got {ids.shape}")
    for t in ids.tolist():
        if not 0 <= t < vocab_size:
            raise ValueError(f"token id {t} is out of range for vocab_size {vocab_size}")
    return (ids[:, None] == np.arange(vocab_size)[None, :]).astype(np.float64)


def embed(ids, E):
    E = np.array(E, dtype=np.float64)
    ids = np.array(ids)
    if E.ndim != 2 or ids.ndim != 1:
        raise ValueError(f"need ids (n,) and E (vocab, d), got {ids.shape} and {E.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= len(E)):
        raise ValueError(f"ids must be in [0, {len(E)})")
    return np.take(E, ids, axis=0)


def sinusoidal_positional_encoding(max_len, d_model):
    pe = np.empty((max_len, d_model), dtype=np.float64)
    for p in range(max_len):
        for j in range(d_model):
            i = j // 2
            angle = p / math.pow(10000.0, 2 * i / d_model)
            pe[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def add_positional_encoding(X):
    X = np.array(X, dtype=np.float64)
    if X.ndim < 2:
        raise ValueError(f"X needs at least 2 dimensions, got {X.shape}")
    n, d = X.shape[-2], X.shape[-1]
    return X + sinusoidal_positional_encoding(n, d)[(None,) * (X.ndim - 2)]
