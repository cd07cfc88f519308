"""Where a module applies its dropout, judged from one train-mode forward whatever the random draws.

The hidden suites of stages 5 and 6 make each sub-layer's output a constant vector with a single non-zero
feature (attention: a zero value projection, so the context is zero and the output is ``w_o``'s bias; the
feed-forward: a zero ``linear2`` weight, so the output is its bias). Dropout then either keeps that feature,
scaled by 1 / (1 - p), or drops it: each position can come out of the contract's order
``x = norm(x + dropout(sublayer(x)))`` in only 2 ** steps ways, which ``outcomes`` lists and ``check`` finds.
Dropout elsewhere (on the residual sum, after the norm, before the positional encoding) gives other values;
no dropout at all keeps every one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..i18n import tr


@dataclass(frozen=True)
class Step:
    """``x = norm(x + dropout(added))``, or ``x = x + dropout(added)`` where ``norm`` is None."""
    added: object  # (d,) torch tensor with one non-zero feature
    norm: tuple | None = None  # (weight, bias, eps) of a LayerNorm over the last axis


def constant_sublayers(state: dict, prefix: str, sublayers: list, d: int, eps: float) -> list:
    """Make each sub-layer of the post-LN layer at ``prefix`` in ``state`` (a ``state_dict``, changed in place)
    output a constant with one non-zero feature, and return their steps. ``sublayers`` names them in order, each
    followed by ``norm1``, ``norm2``, ...: an attention (``w_v`` zero, so the output is ``w_o``'s bias) or ``ffn``
    (``linear2``'s weight zero, so the output is its bias)."""
    import torch
    steps = []
    for i, name in enumerate(sublayers):
        added = torch.zeros(d)
        added[(3 + 5 * i) % d] = (2.5, -3.0, 2.0)[i % 3]
        zeroed, bias = ((["ffn.linear2.weight"], "ffn.linear2.bias") if name == "ffn"
                        else ([f"{name}.w_v.weight", f"{name}.w_v.bias"], f"{name}.w_o.bias"))
        for key in zeroed:
            state[prefix + key] = torch.zeros_like(state[prefix + key])
        state[prefix + bias] = added
        norm = f"{prefix}norm{i + 1}"
        steps.append(Step(added, (state[f"{norm}.weight"], state[f"{norm}.bias"], eps)))
    return steps


def one_layer_stack(state: dict, pe, sublayers: list, eps: float) -> list:
    """An Encoder or Decoder of one layer (``state`` changed in place), fed the ids 1..n at positions 0..n-1: its
    embedding rows, scaled by sqrt(d) and added to ``pe`` (n, d), give a sum with one non-zero feature (the
    embedding's own step); then its layer's sub-layers (``constant_sublayers``). Their steps, in order."""
    import torch
    n, d = pe.shape
    summed = torch.zeros(d)
    summed[d // 2 - 1] = 2.0
    state["embedding.weight"] = torch.cat([torch.zeros(1, d), (summed - pe) / d ** 0.5])  # row 0: the padding id
    return [Step(summed), *constant_sublayers(state, "layers.0.", sublayers, d, eps)]


def outcomes(start, steps: list, p: float):
    """Every output (..., 2 ** len(steps), d) of the contract's order from ``start`` (..., d): for each step,
    its added feature dropped (0) or kept (scaled by 1 / (1 - p)); outcome k keeps step i where bit i of k is 1."""
    import torch
    import torch.nn.functional as F
    xs = [start.double()]
    for step in steps:  # the outcomes so far, then the same with this step kept: bit i of the index is step i
        added = step.added.double() / (1 - p)
        xs = [x + keep * added for keep in (0.0, 1.0) for x in xs]
        if step.norm is not None:
            w, b, eps = step.norm
            xs = [F.layer_norm(x, x.shape[-1:], w.double(), b.double(), eps) for x in xs]
    return torch.stack(xs, dim=-2).numpy()  # (..., 2 ** len(steps), d)


def check(got: np.ndarray, expected_outcomes: np.ndarray, names: list, *, what: str, hint: str,
          atol: float = 1e-3) -> None:
    """``got`` (..., d) must be one of ``expected_outcomes`` (..., 2 ** n, d) at every position, and each step
    (``names``) must be dropped at some position and kept at another.

    A correct module fails only if one step's single feature is kept everywhere or dropped everywhere: at
    p = 0.5 over P positions that is 2 * 0.5 ** P per step (P = 64 in the suites: about 1e-19)."""
    distance = np.abs(got[..., None, :] - expected_outcomes).max(axis=-1)  # (..., 2 ** n)
    best = distance.argmin(axis=-1)
    off = distance.min(axis=-1) > atol
    if off.any():
        raise AssertionError(tr("{what}: {bad} of {total} positions are not what the contract's order gives with "
                                "any choice of dropped features (largest difference {diff}). {hint}", what=what,
                                bad=int(off.sum()), total=off.size, diff=f"{distance.min(axis=-1).max():.3g}",
                                hint=hint))
    for i, name in enumerate(names):
        kept = (best >> i) & 1
        if kept.all():
            raise AssertionError(tr("{what}: {name} is never dropped in train mode. {hint}", what=what, name=name,
                                    hint=hint))
        if not kept.any():
            raise AssertionError(tr("{what}: {name} is dropped at every position. {hint}", what=what, name=name,
                                    hint=hint))


def check_entries(got: np.ndarray, kept: np.ndarray, *, what: str, hint: str, rtol: float = 1e-3) -> None:
    """Dropout applied last: every entry of ``got`` is 0 (dropped) or its ``kept`` value (already scaled by
    1 / (1 - p)), and among the entries where the two differ clearly some are dropped and some kept.

    A correct module fails only if all of those entries are kept or all dropped: 2 * p ** N at p = 0.5 over the
    N (well over 100 in the suites) entries whose kept value is not near 0."""
    tol = rtol * (1 + np.abs(kept))
    dropped, same = np.abs(got) <= tol, np.abs(got - kept) <= tol
    if not (dropped | same).all():
        raise AssertionError(tr("{what}: {bad} of {total} entries are neither dropped (0) nor kept and scaled by "
                                "1 / (1 - p). {hint}", what=what, bad=int((~(dropped | same)).sum()), total=got.size,
                                hint=hint))
    clear = np.abs(kept) > 10 * tol
    if not (dropped & clear).any():
        raise AssertionError(tr("{what}: no entry was dropped in train mode. {hint}", what=what, hint=hint))
    if not (same & clear).any():
        raise AssertionError(tr("{what}: every entry was dropped. {hint}", what=what, hint=hint))
