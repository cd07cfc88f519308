# Starter code, generated from the reference by `make starter`. Replace every
# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.
"""Stage 1 - similarity between vectors (slides 11-13, 68).

Attention starts by asking "how related is this Query to each Key?". The
lecture's answer is the dot product (slide 13): multiply matching components
and add them up. The decoder state is compared with every encoder state, one
score per input position (slide 12). Stacking many queries gives a whole
score matrix in one matrix product (slide 38). Cosine similarity (slide 68)
is the dot product of the two vectors after scaling each to length 1.

All floating inputs are float64 numpy arrays (lists are accepted too).
Bad shapes raise ValueError with a message that names the shapes.
"""

import numpy as np


def _as_vector(x, name):
    """Return `x` as a float64 1-D array, or raise ValueError naming its shape."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector, got shape {x.shape}")
    return x


def _check_same_length(u, v):
    if u.shape != v.shape:
        raise ValueError(f"vectors must have the same length, got shapes {u.shape} and {v.shape}")


def dot_product(u, v):
    """Dot product of two vectors (slide 13).

    u: (d,), v: (d,)  ->  float, sum_i u[i] * v[i]
    """
    raise NotImplementedError('check shapes (_as_vector, _check_same_length); multiply matching components and add them up; return a float')


def similarity_scores(query, keys):
    """Compare one decoder state with every encoder state (slide 12).

    query: (d,)     the current decoder state (the Query)
    keys:  (n, d)   one encoder state per input position (the Keys)
    returns (n,)    scores[j] = dot(query, keys[j])
    """
    raise NotImplementedError('check query (d,) and keys (n, d); one dot product per row of keys = one matrix-vector product')


def similarity_matrix(Q, K):
    """All Query-Key dot products at once (slides 34, 38).

    Q: (..., m, d)    m queries
    K: (..., n, d)    n keys; leading dimensions (batch, heads, ...) broadcast
    returns (..., m, n)   S[..., i, j] = dot(Q[..., i, :], K[..., j, :]) = (Q K^T)[..., i, j]
    """
    raise NotImplementedError('check ranks and the shared d; then Q times K transposed over the last two axes only (np.swapaxes)')


def cosine_similarity(u, v):
    """Cosine of the angle between two vectors (slide 68).

    u: (d,), v: (d,)  ->  float in [-1, 1], dot(u, v) / (|u| |v|);
    0.0 when either vector is all zeros (there is no angle to measure).
    """
    raise NotImplementedError('check shapes as in dot_product; dot(u, v) / (|u| |v|), and 0.0 if either length is zero')
