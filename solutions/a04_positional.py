"""Stage 4 - word embeddings and sinusoidal positional encoding (slides 20-29).

A token id becomes a vector by a row lookup in the embedding matrix E; this
is the same as multiplying the token's one-hot vector by E (slide 20).

Self-attention alone cannot tell positions apart: permute the input tokens
and the outputs are permuted the same way (slide 21), so "Squatch eats pizza"
and "Pizza eats Squatch" would look alike (slide 27). The original
Transformer adds to every token a position vector made of sines and cosines
of different frequencies (slides 22-25), element-wise (slide 26):

    PE[p, 2i]   = sin(p / 10000^(2i / d_model))
    PE[p, 2i+1] = cos(p / 10000^(2i / d_model))

Columns 2i and 2i+1 share one frequency (sin and cos interleaved, as in the
paper). Positions start at 0. An odd d_model simply ends with a sin column.
"""

import numpy as np


def one_hot(ids, vocab_size):
    """One-hot rows for token ids (slide 20).

    ids: (n,) integers in [0, vocab_size)
    returns (n, vocab_size) float64, row k has a single 1.0 at column ids[k].
    Raises ValueError for ids out of range (no silent wrap-around of -1).
    """
    # BEGIN SOLUTION: check ids are 1-D integers inside [0, vocab_size); then pick rows of the identity matrix (np.eye)
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D (n,), got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"ids must lie in [0, {vocab_size}), got min {ids.min()} and max {ids.max()}")
    return np.eye(vocab_size, dtype=np.float64)[ids.astype(np.int64)]
    # END SOLUTION


def embed(ids, E):
    """Embedding lookup: row ids[k] of E for every token (slide 20).

    ids: (n,) integers in [0, vocab_size)
    E:   (vocab_size, d) the embedding matrix
    returns (n, d), equal to one_hot(ids, vocab_size) @ E but without building the one-hot matrix.
    """
    # BEGIN SOLUTION: check E is 2-D and ids are in range (as in one_hot); then index the rows of E with ids
    E = np.asarray(E, dtype=np.float64)
    if E.ndim != 2:
        raise ValueError(f"E must be (vocab_size, d), got shape {E.shape}")
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D (n,), got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= E.shape[0]):
        raise ValueError(f"ids must lie in [0, {E.shape[0]}) for E {E.shape}, got min {ids.min()} and max {ids.max()}")
    return E[ids]
    # END SOLUTION


def sinusoidal_positional_encoding(max_len, d_model):
    """The sinusoidal position table of the original Transformer (slides 22-25).

    returns PE (max_len, d_model) float64 with, for p in [0, max_len):
        PE[p, 2i]   = sin(p / 10000^(2i / d_model))
        PE[p, 2i+1] = cos(p / 10000^(2i / d_model))
    """
    # BEGIN SOLUTION: positions p as a column, the exponent 2i for column j is j - j % 2; sin on even columns, cos on odd; float64
    if max_len < 0 or d_model < 1:
        raise ValueError(f"need max_len >= 0 and d_model >= 1, got max_len={max_len}, d_model={d_model}")
    positions = np.arange(max_len, dtype=np.float64)[:, None]       # (max_len, 1)
    cols = np.arange(d_model)
    two_i = cols - cols % 2                                          # 0, 0, 2, 2, 4, 4, ...
    angles = positions / np.power(10000.0, two_i / d_model)          # (max_len, d_model)
    return np.where(cols % 2 == 0, np.sin(angles), np.cos(angles))
    # END SOLUTION


def add_positional_encoding(X):
    """Add the position table to token embeddings, element-wise (slides 26, 29).

    X: (..., n, d) embeddings of n tokens (leading dimensions such as a batch are kept)
    returns X + PE[:n] with PE = sinusoidal_positional_encoding(n, d), same shape as X.
    """
    # BEGIN SOLUTION: read n and d from the last two axes of X and add the (n, d) table; it broadcasts over leading axes
    X = np.asarray(X, dtype=np.float64)
    if X.ndim < 2:
        raise ValueError(f"X must be (..., n, d), got shape {X.shape}")
    n, d = X.shape[-2:]
    return X + sinusoidal_positional_encoding(n, d)
    # END SOLUTION
