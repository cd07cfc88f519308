"""Properties of the contract checked on generated inputs (Hypothesis), reproducible from the submission's seed.

A property test states what the contract promises for *every* input it allows (values against an oracle,
invariances, edge values, shapes) and lets Hypothesis draw the inputs from the whole space: any axis of size
1, m != n, odd sizes, extreme and infinite values where allowed, every mask form. Each example calls the
student's function through the ``student`` fixture, so the number of examples is kept small (each test
states its own); calls that cost a probe batch several examples into one.

Reproducible: Hypothesis runs from ``testing.case_seed(case)`` (the course secret, the submission's id, the
stage and the test's case number: ``grader/engine/seeds.py``), with no example database and no deadline, so
``grade --seed N`` draws the same examples and shrinks to the same input. Hypothesis is pinned
(requirements.txt): another version may draw other examples from the same seed.

On a failure Hypothesis shrinks the input to a smallest one that still fails, and the feedback shows it
after the failure's own message (which names the mistake). Shrinking stops after ``shrink_calls`` more calls
(the stage's time limit is shared), showing the smallest input found by then. A timeout, a crash, a missing
function or a forbidden call ends the test at once, unshrunk. A failure that does not come back when the
same input is given again is reported as a result that depends on earlier calls (something kept between
calls).

    def test_softmax_properties(student):
        def prop(draw):
            x = draw(scores(), "x")
            ...assertions on student.softmax(x)...
        properties.check(prop, case=40, examples=12, what="softmax")

``check_machine`` does the same for a Hypothesis rule-based state machine (calls in a row, orders drawn
from the seed); its steps are shown as the smallest failing sequence.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as use_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky, HypothesisException
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from grader.sandbox.protocol import ReplyKind, failure

from ..i18n import join, of, tr
from . import testing
from .errors import ForbiddenCall, StudentError, StudentMissing, StudentTimeout, WorkerCrashed

SHOWN_CHARS = 500  # of the smallest failing input, in the feedback
DEPENDS_ON_EARLIER_CALLS = tr("The same input passed when it was given again, so the result depends on earlier "
                              "calls: something is kept between calls (a table, mask or size cached at the first "
                              "call, or a generator ignored); compute it from each call's own inputs.")


def _with_input(exc: StudentError, where, cause: list) -> StudentError:
    """The student's error (same status), its message followed by the failing input and the usual cause."""
    if exc.kind is not ReplyKind.ERROR:
        return exc
    text = join([tr("{message} ({where})", message=exc.message, where=where), *cause], sep=" ")
    return StudentError(failure(exc.kind, text, type=exc.type_name, mro=exc.mro_names, where=exc.where), exc.what)


class _Stop(BaseException):
    """Ends the Hypothesis run at once (Hypothesis catches only Exception): a timeout, a crash, a missing
    function or a forbidden call (``exc``, nothing shown), or the shrinking budget spent (``exc`` and ``shown``:
    the smallest failure so far)."""

    def __init__(self, exc, shown=None):
        super().__init__()
        self.exc, self.shown = exc, shown


def _settings(examples: int, steps: int | None = None) -> settings:
    return settings(max_examples=examples, database=None, deadline=None, derandomize=False, print_blob=False,
                    report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.generate, Phase.shrink),
                    **({"stateful_step_count": steps} if steps else {}))


def show(value) -> str:
    """An input as the feedback shows it: arrays and tensors with their shape, dtype and (some) values."""
    value = testing._to_numpy(value)
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=6, threshold=40, edgeitems=3, separator=", ",
                               max_line_width=10 ** 6)
        return f"array({' '.join(text.split())}, shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, (list, tuple)) and any(isinstance(v, (np.ndarray, list, tuple)) or testing._is_tensor(v)
                                                for v in value):
        inner = ", ".join(show(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return repr(value)


def _shown(drawn: list) -> str:
    text = "; ".join(value if label is None else f"{label} = {show(value)}" for label, value in drawn)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


class _Run:
    """What one property run saw: the inputs of the running example, the smallest failure so far."""

    def __init__(self, examples: int, shrink_calls: int):
        self.budget = examples + shrink_calls
        self.calls = 0
        self.drawn: list = []
        self.failure = None  # (exception, shown input) of the latest failing example: the smallest so far
        self.stopped = None  # the _Stop that ended the run, if one did

    def start(self):
        self.calls += 1
        self.drawn = []
        if self.failure is not None and self.calls > self.budget:
            self.stop(*self.failure)

    def stop(self, exc, shown=None):
        """End the run now (Hypothesis may report the interruption as its own error: ``_finish`` looks here)."""
        self.stopped = _Stop(exc, shown)
        raise self.stopped

    def draw(self, data, strategy, label: str):
        value = data.draw(strategy, label=label)
        self.drawn.append((label, value))
        return value

    def note(self, label: str, value):
        """Show ``value`` among the inputs (an input built from what was drawn)."""
        self.drawn.append((label, value))

    def guard(self, thunk):
        try:
            return thunk()
        except (StudentTimeout, WorkerCrashed, StudentMissing, ForbiddenCall) as exc:
            self.stop(exc)
        except HypothesisException:  # Hypothesis's own signals (an input it rejects): not a failure
            raise
        except Exception as exc:
            self.failure = (exc, _shown(self.drawn))
            raise


def check(prop, *, case, examples: int, what: str, shrink_calls: int | None = None) -> None:
    """Run ``prop(draw)`` on ``examples`` examples drawn from the stage seed's case ``case``.

    ``draw(strategy, label)`` draws a value and records it under ``label`` (what the feedback shows);
    ``draw.note(label, value)`` records a value built from the draws. ``prop`` raises AssertionError (or
    lets the student's error through) when the contract does not hold. ``what``: the function or
    module, for the feedback. ``shrink_calls``: how many more calls shrinking may take (default
    ``4 * examples + 20``)."""
    run = _Run(examples, 4 * examples + 20 if shrink_calls is None else shrink_calls)

    def inner(data):
        run.start()

        def draw(strategy, label):
            return run.draw(data, strategy, label)
        draw.note = run.note
        run.guard(lambda: prop(draw))

    test = use_seed(testing.case_seed(case))(_settings(examples)(given(st.data())(inner)))
    _finish(lambda: test(), run, what)


def check_machine(machine, *, case, examples: int, steps: int, what: str, shrink_calls: int | None = None) -> None:
    """Run the rule-based state machine class ``machine`` ``examples`` times with up to ``steps`` rules each,
    in orders drawn from the stage seed's case ``case``. Its rules call the student's code through
    ``self.call(label, thunk)`` (``label``: the call as the feedback shows it), so that a failure shows the
    calls of the smallest failing sequence, in order; ``machine.run`` is set to the run's recorder."""
    run = _Run(examples, 4 * examples + 20 if shrink_calls is None else shrink_calls)

    class Recorded(machine):
        def __init__(self):
            run.start()
            super().__init__()

        def call(self, label, thunk):
            run.note(None, f"{len(run.drawn) + 1}. {label}")
            return run.guard(thunk)

    Recorded.__name__ = machine.__name__
    Recorded = use_seed(testing.case_seed(case))(Recorded)
    _finish(lambda: run_state_machine_as_test(Recorded, settings=_settings(examples, steps)), run, what,
            sequence=True)


def _finish(go, run: _Run, what: str, sequence: bool = False) -> None:
    """Run ``go`` and turn its failure into the student's feedback, with the smallest failing input."""
    try:
        go()
        return
    except BaseException as raised:  # noqa: BLE001 - sorted out below; anything else is raised again
        if run.stopped is not None:  # ended by us: Hypothesis may have raised its own error about it
            exc, shown, flaky = run.stopped.exc, run.stopped.shown, False
            if shown is None:  # a timeout, a crash, a missing function: as any other test reports it
                raise exc from None
        elif isinstance(raised, Flaky):
            inner = [e for e in getattr(raised, "exceptions", ()) if isinstance(e, (AssertionError, StudentError))]
            if not inner or run.failure is None:
                raise
            exc, shown, flaky = inner[0], run.failure[1], True
        elif isinstance(raised, (AssertionError, StudentError)):
            exc, shown, flaky = raised, (run.failure[1] if run.failure else _shown(run.drawn)), False
        else:
            raise
    if sequence:
        where = tr("smallest failing sequence of calls found from this submission's seed: {calls}", calls=shown)
    else:
        where = tr("smallest failing input found from this submission's seed: {inputs}", inputs=shown)
    cause = [DEPENDS_ON_EARLIER_CALLS] if flaky else ([testing.FIRST_CALL_CAUSE] if sequence else [])
    if isinstance(exc, StudentError):
        raise _with_input(exc, join([what, ", ", where], sep=""), cause) from None
    problem = of(exc)
    if not str(problem).rstrip().endswith((".", ")")):
        problem = join([problem, "."], sep="")
    raise AssertionError(join([problem, tr("({where})", where=where), *cause], sep=" ")) from None



# ---------------------------------------------------------------- strategies the suites share

def shapes(min_dims: int = 1, max_dims: int = 3, max_side: int = 5, max_size: int = 60):
    """Array shapes: every axis from 1 (any axis may be 1) to ``max_side``, at most ``max_size`` entries."""
    return st.lists(st.integers(1, max_side), min_size=min_dims, max_size=max_dims).map(tuple).filter(
        lambda s: int(np.prod(s)) <= max_size)


def floats(scale: float = 10.0, extremes=(), width: int = 64):
    """Finite floats of magnitude up to ``scale`` (small ones, integers and exact zeros shrink first),
    sometimes one of ``extremes`` (e.g. -inf, +-1e4)."""
    plain = st.floats(-scale, scale, allow_nan=False, allow_infinity=False, width=width)
    return st.one_of(plain, st.sampled_from(list(extremes))) if extremes else plain


def arrays(shape, elements, dtype=np.float64):
    """An array of ``shape`` (a tuple or a strategy of tuples) with entries drawn from ``elements``."""
    from hypothesis.extra import numpy as hnp
    return hnp.arrays(dtype, shape, elements=elements)


# ---------------------------------------------------------------- calls in a row, in orders drawn from the seed

@dataclass(frozen=True)
class Function:
    """A contract function as the calls-in-a-row machine calls it.

    ``axes``: each size's name and its range ``(low, high)``; ``features``: the axes that are a width
    (``d``, ``d_model``), changed on their own by the machine; ``make(sizes, g)`` the call's arguments
    (``g`` a numpy Generator); ``call(*args)`` the student's function (or a probe); ``check(got, args)``
    raises AssertionError when the result breaks the contract (the suite's comparison with its oracle)."""
    name: str
    axes: dict
    make: Callable
    call: Callable
    check: Callable
    features: tuple = ()

    def sizes(self):
        return st.fixed_dictionaries({a: st.integers(lo, hi) for a, (lo, hi) in self.axes.items()})

    def longer(self, sizes, data):
        """Every axis at least as long, one strictly longer (within its range)."""
        grown = {a: data.draw(st.integers(sizes[a], self.axes[a][1])) for a in self.axes}
        if grown == sizes:
            a = next((a for a in self.axes if sizes[a] < self.axes[a][1]), None)
            if a is not None:
                grown[a] += 1
        return grown


def calls_in_a_row(functions, *, case, examples: int, steps: int, what: str, shrink_calls: int | None = None):
    """Call the contract ``functions`` several times in a row, in an order drawn from the seed's case
    ``case``, with sizes drawn anew for each call; every sequence holds a short call then a longer one,
    a long call then a shorter one, and (where a function has a width) a call whose width changed. A
    wrong result anywhere fails, showing the smallest failing sequence of calls."""
    functions = list(functions)
    with_width = [f for f in functions if f.features]

    class CallsInARow(RuleBasedStateMachine):
        def one(self, f, sizes, data):
            args = f.make(sizes, np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="values")))
            label = f"{f.name}({', '.join(f'{a}={v}' for a, v in sizes.items())})"
            self.call(label, lambda: f.check(f.call(*args), args))

        @initialize(data=st.data())
        def short_then_long(self, data):
            f = data.draw(st.sampled_from(functions))
            short = data.draw(f.sizes())
            self.one(f, short, data)
            self.one(f, f.longer(short, data), data)

        @initialize(data=st.data())
        def long_then_short(self, data):
            f = data.draw(st.sampled_from(functions))
            short = data.draw(f.sizes())
            self.one(f, f.longer(short, data), data)
            self.one(f, short, data)

        if with_width:
            @initialize(data=st.data())
            def width_changes(self, data):
                f = data.draw(st.sampled_from(with_width))
                sizes = data.draw(f.sizes())
                self.one(f, sizes, data)
                a = data.draw(st.sampled_from(f.features))
                lo, hi = f.axes[a]
                other = data.draw(st.integers(lo, hi).filter(lambda v: v != sizes[a]))
                self.one(f, {**sizes, a: other}, data)

        @rule(data=st.data())
        def another_call(self, data):
            f = data.draw(st.sampled_from(functions))
            self.one(f, data.draw(f.sizes()), data)

    check_machine(CallsInARow, case=case, examples=examples, steps=steps, what=what, shrink_calls=shrink_calls)
