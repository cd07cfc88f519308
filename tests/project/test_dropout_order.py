"""grader/engine/dropout_order.py on hand-made forwards: the contract's order passes whatever the draws, other
orders and no dropout fail (the hidden suites of stages 5-8 rely on both)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from grader.engine import dropout_order

P, D = 0.5, 8


def _steps():
    a, b = torch.zeros(D), torch.zeros(D)
    a[1], b[6] = 2.5, -3.0
    norms = [(1 + 0.3 * torch.randn(D, generator=torch.Generator().manual_seed(s)), 0.1 * torch.ones(D), 1e-5)
             for s in (1, 2)]
    return [dropout_order.Step(a, norms[0]), dropout_order.Step(b, norms[1])]


def _ln(x, norm):
    w, b, eps = norm
    return F.layer_norm(x, x.shape[-1:], w, b, eps)


def _forward(x, steps, order, seed):
    torch.manual_seed(seed)
    drop = torch.nn.Dropout(P).train()
    for s in steps:
        if order == "contract":
            x = _ln(x + drop(s.added.expand_as(x)), s.norm)
        elif order == "on_the_sum":
            x = _ln(drop(x + s.added), s.norm)
        elif order == "after_the_norm":
            x = drop(_ln(x + s.added, s.norm))
        else:  # no dropout
            x = _ln(x + s.added, s.norm)
    return x.numpy()


@pytest.mark.parametrize("seed", range(5))
def test_the_contracts_order_passes_whatever_the_draws(seed):
    x = torch.randn(8, 8, D, generator=torch.Generator().manual_seed(100 + seed))
    steps = _steps()
    dropout_order.check(_forward(x, steps, "contract", seed), dropout_order.outcomes(x, steps, P), ["a", "b"],
                        what="layer", hint="")


@pytest.mark.parametrize("order", ["on_the_sum", "after_the_norm", "none"])
def test_other_orders_fail(order):
    x = torch.randn(8, 8, D, generator=torch.Generator().manual_seed(7))
    steps = _steps()
    with pytest.raises(AssertionError, match="positions are not"):
        dropout_order.check(_forward(x, steps, order, 0), dropout_order.outcomes(x, steps, P), ["a", "b"],
                            what="layer", hint="")


def test_a_step_never_dropped_is_named():
    x = torch.randn(8, 8, D, generator=torch.Generator().manual_seed(8))
    steps = _steps()
    kept_everywhere = dropout_order.outcomes(x, steps, P)[..., 1, :]  # index 1: step "a" kept, "b" dropped
    with pytest.raises(AssertionError, match="a is never dropped"):
        dropout_order.check(kept_everywhere, dropout_order.outcomes(x, steps, P), ["a", "b"], what="layer", hint="")


def test_outcome_index_bits_are_the_steps():
    x = torch.zeros(1, D)
    steps = [dropout_order.Step(torch.eye(D)[0]), dropout_order.Step(torch.eye(D)[1])]
    out = dropout_order.outcomes(x, steps, P)[0]  # (4, D), no norms: plain sums
    assert np.allclose(out[:, :2], [[0, 0], [2, 0], [0, 2], [2, 2]])


def test_entries_dropped_last():
    kept = np.linspace(-2, 2, 200) / (1 - P)
    draws = np.random.default_rng(0).random(200) < P
    dropout_order.check_entries(np.where(draws, 0.0, kept), kept, what="out", hint="")
    with pytest.raises(AssertionError, match="no entry was dropped"):
        dropout_order.check_entries(kept, kept, what="out", hint="")
    with pytest.raises(AssertionError, match="every entry was dropped"):
        dropout_order.check_entries(np.zeros(200), kept, what="out", hint="")
    with pytest.raises(AssertionError, match="neither dropped"):
        dropout_order.check_entries(kept * (1 - P), kept, what="out", hint="")
