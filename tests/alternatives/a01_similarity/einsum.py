"""Alternative stage 1: np.einsum everywhere, np.linalg.norm for lengths, explicit shape checks."""
import numpy as np


def _vec(x):
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"expected a vector, got shape {x.shape}")
    return x


def dot_product(u, v):
    u, v = _vec(u), _vec(v)
    if len(u) != len(v):
        raise ValueError(f"length mismatch: {u.shape} vs {v.shape}")
    return float(np.einsum("i,i->", u, v))


def similarity_scores(query, keys):
    query = _vec(query)
    keys = np.asarray(keys, dtype=float)
    if keys.ndim != 2 or keys.shape[-1] != query.size:
        raise ValueError(f"query {query.shape} vs keys {keys.shape}")
    return np.einsum("nd,d->n", keys, query)


def similarity_matrix(Q, K):
    Q, K = np.asarray(Q, dtype=float), np.asarray(K, dtype=float)
    if min(Q.ndim, K.ndim) < 2 or Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q {Q.shape} vs K {K.shape}")
    try:
        np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    except ValueError as exc:
        raise ValueError(f"Q {Q.shape} vs K {K.shape}: {exc}") from None
    return np.einsum("...md,...nd->...mn", Q, K)


def cosine_similarity(u, v):
    u, v = _vec(u), _vec(v)
    if u.shape != v.shape:
        raise ValueError(f"length mismatch: {u.shape} vs {v.shape}")
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    return 0.0 if nu == 0 or nv == 0 else float(np.einsum("i,i->", u / nu, v / nv))
