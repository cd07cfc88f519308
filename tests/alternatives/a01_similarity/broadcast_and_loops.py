"""Alternative stage 1: Python loops where the contract allows them, broadcast-multiply-and-sum for the matrix."""
import math

import numpy as np


def _check_vectors(u, v):
    u, v = np.array(u, dtype=np.float64), np.array(v, dtype=np.float64)
    if u.ndim != 1 or v.ndim != 1 or u.shape[0] != v.shape[0]:
        raise ValueError(f"need two 1-D vectors of equal length, got {u.shape} and {v.shape}")
    return u, v


def dot_product(u, v):
    u, v = _check_vectors(u, v)
    total = 0.0
    for a, b in zip(u.tolist(), v.tolist()):
        total += a * b
    return total


def similarity_scores(query, keys):
    query = np.array(query, dtype=np.float64)
    keys = np.array(keys, dtype=np.float64)
    if query.ndim != 1 or keys.ndim != 2 or keys.shape[1] != query.shape[0]:
        raise ValueError(f"bad shapes: query {query.shape}, keys {keys.shape}")
    return (keys * query[None, :]).sum(axis=1)


def similarity_matrix(Q, K):
    Q = np.array(Q, dtype=np.float64)
    K = np.array(K, dtype=np.float64)
    if Q.ndim < 2 or K.ndim < 2 or Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"bad shapes: Q {Q.shape}, K {K.shape}")
    try:
        return (Q[..., :, None, :] * K[..., None, :, :]).sum(axis=-1)
    except ValueError:
        raise ValueError(f"leading dimensions of Q {Q.shape} and K {K.shape} do not broadcast") from None


def cosine_similarity(u, v):
    u, v = _check_vectors(u, v)
    nu = math.sqrt(sum(x * x for x in u.tolist()))
    nv = math.sqrt(sum(x * x for x in v.tolist()))
    if nu == 0 or nv == 0:
        return 0.0
    return dot_product(u, v) / (nu * nv)
