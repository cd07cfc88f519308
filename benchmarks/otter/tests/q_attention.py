# Otter-Grader (OK format) equivalent of our hidden suite of a03_attention:
# one case per hidden test function of tests/hidden/test_a03_attention.py (17),
# the same inputs, parametrised cases looped over, the same tolerances
# (atol 1e-10, rtol 1e-8) and the same vectorisation check (<= 20x an inline reference).
# Expected values are computed inline (no reference module in the Otter environment).
OK_FORMAT = True

_REF = r"""
>>> import numpy as np
>>> import time
>>> def _sm(x, axis=-1):
...     m = np.max(x, axis=axis, keepdims=True)
...     m = np.where(np.isfinite(m), m, 0.0)
...     e = np.exp(x - m)
...     s = np.sum(e, axis=axis, keepdims=True)
...     return np.divide(e, s, out=np.zeros_like(e), where=s > 0)
>>> def _sdpa(Q, K, V, mask=None):
...     sc = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
...     if mask is not None:
...         sc = np.where(mask, sc, -np.inf)
...     w = _sm(sc)
...     return w @ V, w
>>> def _ctx(s, H):
...     w = _sm(H @ s)
...     return w @ H, w
>>> def _rng(seed):
...     return np.random.default_rng(3000 + seed)
>>> def _close(a, b):
...     a = np.asarray(a, dtype=np.float64); b = np.asarray(b, dtype=np.float64)
...     return a.shape == b.shape and bool(np.allclose(a, b, atol=1e-10, rtol=1e-8))
>>> def _same(got, exp):
...     return isinstance(got, tuple) and len(got) == 2 and _close(got[0], exp[0]) and _close(got[1], exp[1])
>>> def _raises(fn, *args):
...     try:
...         fn(*args)
...     except ValueError:
...         return True
...     except Exception:
...         return False
...     return False
"""


def _case(body):
    return {"code": _REF + body, "hidden": False, "locked": False}


test = {
    "name": "q_attention",
    "points": 14,
    "suites": [{
        "type": "doctest", "scored": True, "setup": "", "teardown": "",
        "cases": [
            # attention_context (slides 11-15)
            _case(r"""
>>> def _one(n, d):
...     g = _rng(10 * n + d)
...     s, H = g.normal(size=d), g.normal(size=(n, d))
...     return _same(attention_context(s, H), _ctx(s, H))
>>> all(_one(n, d) for n, d in [(1, 3), (4, 6), (9, 2)])
True
"""),
            _case(r"""
>>> H = np.eye(3); s = np.array([1.0, 0.8, -0.5])
>>> _same(attention_context(s, H), _ctx(s, H))
True
"""),
            _case(r"""
>>> g = _rng(40)
>>> s, H = g.normal(size=8) * 30, g.normal(size=(6, 8)) * 30
>>> r = attention_context(s, H)
>>> bool(np.isfinite(r[1]).all()) and _same(r, _ctx(s, H))
True
"""),
            _case(r"""
>>> _raises(attention_context, np.ones(3), np.ones((4, 5))) and _raises(attention_context, np.ones((1, 3)), np.ones((4, 3)))
True
"""),
            # scaled_dot_product_attention (slides 5, 34-38)
            _case(r"""
>>> def _one(m, n, d_k, d_v):
...     g = _rng(m * 100 + n * 10 + d_k)
...     Q, K, V = g.normal(size=(m, d_k)), g.normal(size=(n, d_k)), g.normal(size=(n, d_v))
...     return _same(scaled_dot_product_attention(Q, K, V), _sdpa(Q, K, V))
>>> all(_one(*a) for a in [(4, 4, 8, 8), (3, 6, 5, 2), (7, 2, 16, 3), (1, 5, 9, 4)])
True
"""),
            _case(r"""
>>> def _one(q_shape, k_lead):
...     g = _rng(len(q_shape) * 10 + len(k_lead))
...     Q = g.normal(size=q_shape)
...     K, V = g.normal(size=k_lead + (7, 8)), g.normal(size=k_lead + (7, 6))
...     return _same(scaled_dot_product_attention(Q, K, V), _sdpa(Q, K, V))
>>> all(_one(*a) for a in [((2, 5, 8), (2,)), ((2, 3, 5, 8), (2, 3)), ((2, 3, 5, 8), (3,)), ((5, 8), (2, 3))])
True
"""),
            _case(r"""
>>> def _one(mask_shape):
...     g = _rng(sum(mask_shape))
...     Q, K, V = g.normal(size=(2, 3, 5, 4)), g.normal(size=(2, 3, 7, 4)), g.normal(size=(2, 3, 7, 6))
...     mask = g.random(mask_shape) < 0.6
...     mask[..., 0] = True
...     return _same(scaled_dot_product_attention(Q, K, V, mask), _sdpa(Q, K, V, mask))
>>> all(_one(s) for s in [(5, 7), (1, 5, 7), (2, 1, 1, 7), (2, 3, 5, 7), (7,)])
True
"""),
            _case(r"""
>>> g = _rng(50)
>>> Q, K, V = g.normal(size=(6, 4)), g.normal(size=(6, 4)), g.normal(size=(6, 3))
>>> mask = np.tril(np.ones((6, 6), dtype=bool))
>>> r = scaled_dot_product_attention(Q, K, V, mask)
>>> bool(np.all(np.asarray(r[1])[~mask] == 0.0)) and _same(r, _sdpa(Q, K, V, mask))
True
"""),
            _case(r"""
>>> g = _rng(51)
>>> Q, K, V = g.normal(size=(2, 4, 3)), g.normal(size=(2, 5, 3)), g.normal(size=(2, 5, 2))
>>> mask = g.random((2, 4, 5)) < 0.7
>>> mask[:, :, 0] = True; mask[0, 1, :] = False; mask[1, 3, :] = False
>>> _same(scaled_dot_product_attention(Q, K, V, mask), _sdpa(Q, K, V, mask))
True
"""),
            _case(r"""
>>> g = _rng(52)
>>> Q, K, V = g.normal(size=(5, 16)) * 40, g.normal(size=(6, 16)) * 40, g.normal(size=(6, 4))
>>> _same(scaled_dot_product_attention(Q, K, V), _sdpa(Q, K, V))
True
"""),
            _case(r"""
>>> g = _rng(53)
>>> Q, K, V = g.normal(size=(5, 4)) * 0.3, g.normal(size=(6, 4)) * 0.3, g.normal(size=(6, 3))
>>> out, w = scaled_dot_product_attention(Q, K, V)
>>> bool(np.allclose(np.sum(w, axis=-1), 1.0, atol=1e-10)) and _close(out, np.asarray(w) @ V)
True
"""),
            _case(r"""
>>> f = scaled_dot_product_attention
>>> all([_raises(f, np.ones((3, 4)), np.ones((5, 6)), np.ones((5, 2))), _raises(f, np.ones((3, 4)), np.ones((5, 4)), np.ones((6, 2))),
...      _raises(f, np.ones(4), np.ones((5, 4)), np.ones((5, 2))),
...      _raises(f, np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), np.ones((4, 5), dtype=bool))])
True
"""),
            _case(r"""
>>> g = _rng(54)
>>> Q, K, V = g.normal(size=(8000, 4)), g.normal(size=(4, 4)), g.normal(size=(4, 4))
>>> def _best(fn, repeat=5):
...     best = float("inf")
...     for _ in range(repeat):
...         t = time.perf_counter(); fn(Q, K, V); best = min(best, time.perf_counter() - t)
...     return best
>>> _same(scaled_dot_product_attention(Q, K, V), _sdpa(Q, K, V)) and _best(scaled_dot_product_attention) <= 20 * _best(_sdpa)
True
"""),
            # self_attention (slides 30-38)
            _case(r"""
>>> def _one(n, d_model, d_k, d_v):
...     g = _rng(n * 100 + d_model + d_k)
...     X = g.normal(size=(n, d_model))
...     Wq, Wk, Wv = g.normal(size=(d_model, d_k)), g.normal(size=(d_model, d_k)), g.normal(size=(d_model, d_v))
...     return _same(self_attention(X, Wq, Wk, Wv), _sdpa(X @ Wq, X @ Wk, X @ Wv))
>>> all(_one(*a) for a in [(5, 8, 4, 3), (3, 6, 6, 6), (7, 10, 2, 5)])
True
"""),
            _case(r"""
>>> g = _rng(60)
>>> X = g.normal(size=(6, 8))
>>> Wq, Wk, Wv = g.normal(size=(8, 4)), g.normal(size=(8, 4)), g.normal(size=(8, 5))
>>> mask = np.tril(np.ones((6, 6), dtype=bool))
>>> _same(self_attention(X, Wq, Wk, Wv, mask), _sdpa(X @ Wq, X @ Wk, X @ Wv, mask))
True
"""),
            _case(r"""
>>> g = _rng(61)
>>> X = g.normal(size=(5, 6))
>>> Wq, Wk, Wv = g.normal(size=(6, 3)), g.normal(size=(6, 3)), g.normal(size=(6, 4))
>>> perm = np.array([3, 0, 4, 1, 2])
>>> out, w = self_attention(X, Wq, Wk, Wv)
>>> out_p, w_p = self_attention(X[perm], Wq, Wk, Wv)
>>> _close(out_p, np.asarray(out)[perm]) and _close(w_p, np.asarray(w)[perm][:, perm])
True
"""),
            _case(r"""
>>> X = np.ones((4, 6))
>>> _raises(self_attention, X, np.ones((5, 3)), np.ones((6, 3)), np.ones((6, 2))) and _raises(self_attention, X, np.ones((6, 3)), np.ones((6, 4)), np.ones((6, 2)))
True
"""),
        ],
    }],
}
