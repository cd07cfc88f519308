"""Alternative stage 2: move `axis` last, work on a 2-D table of rows, multiply by reciprocals."""
import math

import numpy as np


def _rows(x, axis):
    x = np.moveaxis(np.array(x, dtype=np.float64), axis, -1)
    return x, x.reshape(-1, x.shape[-1])


def softmax(x, axis=-1):
    moved, rows = _rows(x, axis)
    out = np.zeros_like(rows)
    alive = ~np.all(np.isneginf(rows), axis=1)
    r = rows[alive]
    e = np.exp(r - r.max(axis=1)[:, None])
    out[alive] = e * (1.0 / e.sum(axis=1))[:, None]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def log_softmax(x, axis=-1):
    moved, rows = _rows(x, axis)
    out = np.full_like(rows, -math.inf)
    for i, row in enumerate(rows):               # a loop over slices is allowed here
        if np.all(np.isneginf(row)):
            continue
        m = row.max()
        lse = m + math.log(float(np.exp(row - m).sum()))
        out[i] = row - lse
    return np.moveaxis(out.reshape(moved.shape), -1, axis)
