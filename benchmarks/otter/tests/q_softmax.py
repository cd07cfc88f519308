# Otter-Grader (OK format) equivalent of our hidden suite of a02_softmax:
# one case per hidden test function of tests/hidden/test_a02_softmax.py (12),
# the same inputs, parametrised cases looped over, the same tolerances.
# Expected values are computed inline (no reference module in the Otter environment).
OK_FORMAT = True

_REF = r"""
>>> import numpy as np
>>> def _ref_softmax(x, axis=-1):
...     x = np.asarray(x, dtype=np.float64)
...     m = np.max(x, axis=axis, keepdims=True)
...     m = np.where(np.isfinite(m), m, 0.0)
...     e = np.exp(x - m)
...     s = np.sum(e, axis=axis, keepdims=True)
...     return np.divide(e, s, out=np.zeros_like(e), where=s > 0)
>>> def _ref_log_softmax(x, axis=-1):
...     x = np.asarray(x, dtype=np.float64)
...     m = np.max(x, axis=axis, keepdims=True)
...     sh = x - np.where(np.isfinite(m), m, 0.0)
...     with np.errstate(divide="ignore", invalid="ignore"):
...         out = sh - np.log(np.sum(np.exp(sh), axis=axis, keepdims=True))
...     return np.where(np.isneginf(x), -np.inf, out)
>>> def _rng(seed):
...     return np.random.default_rng(2000 + seed)
>>> def _close(a, b, atol=1e-12, rtol=1e-9):
...     a = np.asarray(a, dtype=np.float64); b = np.asarray(b, dtype=np.float64)
...     return a.shape == b.shape and bool(np.allclose(a, b, atol=atol, rtol=rtol))
"""


def _case(body):
    return {"code": _REF + body, "hidden": False, "locked": False}


test = {
    "name": "q_softmax",
    "points": 8,
    "suites": [{
        "type": "doctest", "scored": True, "setup": "", "teardown": "",
        "cases": [
            _case(r"""
>>> all(_close(softmax(x), _ref_softmax(x)) for x in [_rng(len(s)).normal(size=s) * 3 for s in [(1,), (7,), (4, 5), (2, 3, 6)]])
True
"""),
            _case(r"""
>>> all(_close(softmax(x, axis=a), _ref_softmax(x, axis=a)) for s, a in [((4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 0), ((3, 4, 5), -2)] for x in [_rng(a + 10).normal(size=s) * 2])
True
"""),
            _case(r"""
>>> x = np.array([1.0, 2.0, 3.0])
>>> _close(softmax(x), np.exp(x) / np.exp(x).sum())
True
"""),
            _case(r"""
>>> def _big(scale):
...     x = _rng(3).normal(size=(6, 9)) * scale
...     x[0] = [1e4, 1e4 - 1, 1e4 - 2, -1e4, 0, 5e3, 1e4, -5e3, 2.0]
...     return x
>>> all(bool(np.isfinite(softmax(_big(s))).all()) and _close(softmax(_big(s)), _ref_softmax(_big(s))) for s in [1e2, 1e4])
True
"""),
            _case(r"""
>>> x = _rng(4).normal(size=(5, 8)) * 10
>>> w = np.asarray(softmax(x))
>>> w.shape == x.shape and bool((w >= 0).all()) and bool(np.allclose(w.sum(axis=-1), 1.0, atol=1e-12)) and _close(softmax(x + 1000.0), w)
True
"""),
            _case(r"""
>>> x = _rng(5).normal(size=(4, 6)) * 5
>>> x[0, [1, 4]] = -np.inf; x[2, :5] = -np.inf; x[3, ::2] = -np.inf
>>> w = np.asarray(softmax(x))
>>> (not np.isnan(w).any()) and bool(np.all(w[np.isneginf(x)] == 0.0)) and _close(w, _ref_softmax(x))
True
"""),
            _case(r"""
>>> def _masked(axis):
...     x = _rng(6).normal(size=(4, 4))
...     if axis == -1:
...         x[1, :] = -np.inf
...     else:
...         x[:, 2] = -np.inf
...     x[3, 0] = -np.inf
...     return x
>>> all(_close(softmax(_masked(a), axis=a), _ref_softmax(_masked(a), axis=a)) for a in [-1, 0])
True
"""),
            _case(r"""
>>> all(_close(log_softmax(x, axis=a), _ref_log_softmax(x, axis=a), atol=1e-9) for s, a in [((7,), -1), ((4, 5), -1), ((4, 5), 0), ((2, 3, 4), 1)] for x in [_rng(20 + len(s)).normal(size=s) * 3])
True
"""),
            _case(r"""
>>> x = _rng(21).normal(size=(5, 7)) * 1e4
>>> _close(log_softmax(x), _ref_log_softmax(x), atol=1e-9)
True
"""),
            _case(r"""
>>> x = np.array([[0.0, -800.0, -1e4], [5.0, 5.0 - 750.0, 3.0]])
>>> _close(log_softmax(x), _ref_log_softmax(x), atol=1e-9)
True
"""),
            _case(r"""
>>> x = _rng(22).normal(size=(3, 5))
>>> x[0, [0, 3]] = -np.inf; x[2, :] = -np.inf
>>> lw = np.asarray(log_softmax(x))
>>> (not np.isnan(lw).any()) and _close(lw, _ref_log_softmax(x), atol=1e-9)
True
"""),
            _case(r"""
>>> x = _rng(23).normal(size=(4, 6)) * 4
>>> _close(np.exp(log_softmax(x, axis=0)), softmax(x, axis=0))
True
"""),
        ],
    }],
}
