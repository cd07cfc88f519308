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
    # BEGIN SOLUTION: check shapes (_as_vector, _check_same_length); multiply matching components and add them up; return a float
    u = _as_vector(u, "u")
    v = _as_vector(v, "v")
    _check_same_length(u, v)
    return float(u @ v)
    # END SOLUTION


def similarity_scores(query, keys):
    """Compare one decoder state with every encoder state (slide 12).

    query: (d,)     the current decoder state (the Query)
    keys:  (n, d)   one encoder state per input position (the Keys)
    returns (n,)    scores[j] = dot(query, keys[j])
    """
    # BEGIN SOLUTION: check query (d,) and keys (n, d); one dot product per row of keys = one matrix-vector product
    query = _as_vector(query, "query")
    keys = np.asarray(keys, dtype=np.float64)
    if keys.ndim != 2 or keys.shape[1] != query.shape[0]:
        raise ValueError(f"keys must have shape (n, {query.shape[0]}) to match query {query.shape}, got {keys.shape}")
    return keys @ query
    # END SOLUTION


def similarity_matrix(Q, K):
    """All Query-Key dot products at once (slides 34, 38).

    Q: (..., m, d)    m queries
    K: (..., n, d)    n keys; leading dimensions (batch, heads, ...) broadcast
    returns (..., m, n)   S[..., i, j] = dot(Q[..., i, :], K[..., j, :]) = (Q K^T)[..., i, j]
    """
    # BEGIN SOLUTION: check ranks and the shared d; then Q times K transposed over the last two axes only (np.swapaxes)
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if Q.ndim < 2 or K.ndim < 2:
        raise ValueError(f"Q and K need at least 2 dimensions (..., rows, d), got shapes {Q.shape} and {K.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must share the last dimension d, got shapes {Q.shape} and {K.shape}")
    try:
        np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    except ValueError:
        raise ValueError(f"leading dimensions of Q {Q.shape} and K {K.shape} do not broadcast") from None
    return Q @ np.swapaxes(K, -1, -2)
    # END SOLUTION


def cosine_similarity(u, v):
    """Cosine of the angle between two vectors (slide 68).

    u: (d,), v: (d,)  ->  float in [-1, 1], dot(u, v) / (|u| |v|);
    0.0 when either vector is all zeros (there is no angle to measure).
    """
    # BEGIN SOLUTION: check shapes as in dot_product; dot(u, v) / (|u| |v|), and 0.0 if either length is zero
    u = _as_vector(u, "u")
    v = _as_vector(v, "v")
    _check_same_length(u, v)
    norm_u = np.sqrt(u @ u)
    norm_v = np.sqrt(v @ v)
    if norm_u == 0.0 or norm_v == 0.0:
        return 0.0
    return float((u @ v) / (norm_u * norm_v))
    # END SOLUTION
