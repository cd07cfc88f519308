# Starter code, generated from the reference by `make starter`. Replace every
# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.
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
    raise NotImplementedError('subtract the max along `axis` before exp (an all -inf slice has no max: shift it by 0), then divide by the sum')


def log_softmax(x, axis=-1):
    """Numerically stable log of the softmax along `axis`.

    x: any shape, float64.
    returns the same shape: x - max - log(sum(exp(x - max))); -inf stays -inf
    (an all -inf slice stays all -inf: log of zero weights).
    """
    x = np.asarray(x, dtype=np.float64)
    raise NotImplementedError('shift by the max like softmax, then subtract log(sum(exp(shifted))); do not take log(softmax(x))')
