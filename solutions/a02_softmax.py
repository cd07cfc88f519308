"""Stage 2 - a numerically stable softmax (slide 14).

Softmax turns relevance scores into weights that are positive and sum to 1;
the larger the score, the larger the weight (slide 14). Written naively,
exp(1e4) overflows to inf and inf / inf is NaN. Since
softmax(x) == softmax(x - c) for any constant c, subtracting the maximum
first keeps every exponent <= 0 and nothing overflows.

Attention masks (stage 3) set blocked scores to -inf, which must get weight 0
exactly. A slice where *every* entry is -inf (a query allowed to look at
nothing) gets all-zero weights, not NaN.

log_softmax(x) = x - log(sum(exp(x))) is computed the same stable way, never
as log(softmax(x)) (which underflows to -inf for very unlikely entries).
"""

import numpy as np


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis` (slide 14).

    x: any shape, float64; -inf entries are allowed (blocked positions).
    returns an array of the same shape; every slice along `axis` is >= 0 and
    sums to 1, except an all -inf slice, which becomes all zeros.
    """
    x = np.asarray(x, dtype=np.float64)
    # BEGIN SOLUTION: subtract the max along `axis` before exp (an all -inf slice has no max: shift it by 0), then divide by the sum
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0.0)  # all -inf slice: exp gives zeros below
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    # END SOLUTION


def log_softmax(x, axis=-1):
    """Numerically stable log of the softmax along `axis`.

    x: any shape, float64.
    returns the same shape: x - max - log(sum(exp(x - max))); -inf stays -inf
    (an all -inf slice stays all -inf: log of zero weights).
    """
    x = np.asarray(x, dtype=np.float64)
    # BEGIN SOLUTION: shift by the max like softmax, then subtract log(sum(exp(shifted))); do not take log(softmax(x))
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        log_total = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    with np.errstate(invalid="ignore"):
        out = shifted - log_total
    return np.where(np.isneginf(x), -np.inf, out)
    # END SOLUTION
