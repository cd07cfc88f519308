"""Helpers for writing tests whose failure messages a student can act on.

Everything here runs in the trusted process. ``reference(stage)`` imports the
reference solution (never available to the worker).
"""
from __future__ import annotations

import contextlib
import importlib
import re
import sys
from dataclasses import dataclass
from functools import cache

import numpy as np

from grader.sandbox.protocol import ReplyKind, failure

from ..i18n import join, of, tr
from . import cputime, paths, seeds
from .errors import StudentError

# The seed of the stage whose test is running: the plugin sets it before each test
# (``use_stage_seed``) from the submission's seed (``--seed``) and the test's stage.
_stage = {"seed": None}


def use_stage_seed(seed: int | None) -> None:
    _stage["seed"] = seed


def case_seed(case) -> int:
    """The seed of one case of the running test's stage: the stage seed (course secret,
    submission id, stage; ``grader/engine/seeds.py``) mixed with the test's own case
    number, so that cases stay distinct and every submission gets its own inputs."""
    if _stage["seed"] is None:
        raise RuntimeError("no stage seed: hidden tests draw their inputs under grader.engine.plugin")
    return seeds.case_seed(_stage["seed"], case)


def rng(case) -> np.random.Generator:
    """A numpy generator for case ``case`` of the running stage (in place of a fixed seed)."""
    return np.random.default_rng(case_seed(case))


def torch_generator(case):
    """A torch generator for case ``case`` of the running stage (in place of a fixed seed)."""
    import torch
    return torch.Generator().manual_seed(case_seed(case))


def randn(*shape, case):
    """``seeded_randn`` for case ``case`` of the running stage."""
    return seeded_randn(*shape, seed=case_seed(case))


@cache
def reference(stage_id: str):
    """The reference solution module of a stage, imported in this (trusted) process."""
    if str(paths.SOLUTIONS) not in sys.path:
        sys.path.insert(0, str(paths.SOLUTIONS))
    return importlib.import_module(stage_id)


def _to_numpy(value):
    if "torch" in sys.modules:
        import torch
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
    return value


def as_array(value, what: str = tr("the result")) -> np.ndarray:
    """``value`` as a numeric numpy array, or an AssertionError that says what came back instead."""
    value = _to_numpy(value)
    if value is None:
        raise AssertionError(tr("{what} returned None; did you forget a `return`?", what=what))
    if isinstance(value, (str, dict)):
        # i18n: {type} is the name of a Python type (e.g. list, NoneType).
        raise AssertionError(tr("{what} returned a {type}, not an array",
                                what=what, type=type(value).__name__))
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise AssertionError(tr("{what} returned something that is not an array ({error})",
                                what=what, error=exc)) from None
    if array.dtype.kind not in "biufc":
        raise AssertionError(tr("{what} returned an array of {dtype}, not numbers",
                                what=what, dtype=array.dtype))
    return array


def assert_shape(actual, shape, what: str = tr("the result")) -> np.ndarray:
    array = as_array(actual, what)
    if tuple(array.shape) != tuple(shape):
        raise AssertionError(tr("{what} has shape {shape}, expected {expected}",
                                what=what, shape=tuple(array.shape), expected=tuple(shape)))
    return array


def _fmt(x) -> str:
    return np.array2string(np.asarray(x), precision=4, threshold=6) if np.ndim(x) else f"{x:.6g}"


def assert_close(actual, expected, *, what: str = tr("the result"), atol: float = 1e-8, rtol: float = 1e-6,
                 hint: str = "") -> np.ndarray:
    """Compare values; the message names the worst entry, what was got and expected, and a hint."""
    expected = np.asarray(_to_numpy(expected))
    array = assert_shape(actual, expected.shape, what)
    if expected.dtype == bool:
        expected = expected.astype(np.int64)
    if array.dtype == bool:
        array = array.astype(np.int64)
    hint = join([" ", hint], sep="") if hint else ""
    got_nan, want_nan = np.isnan(array), np.isnan(expected)
    if (got_nan & ~want_nan).any():
        idx = tuple(int(i) for i in np.argwhere(got_nan & ~want_nan)[0])
        raise AssertionError(tr("{what} contains NaN at index {idx} where {expected} was expected.{hint}",
                                what=what, idx=idx, expected=_fmt(expected[idx]), hint=hint))
    same_inf = np.isinf(array) & np.isinf(expected) & (np.sign(array) == np.sign(expected))
    other_inf = (np.isinf(array) | np.isinf(expected)) & ~same_inf & ~(got_nan | want_nan)
    if other_inf.any():  # an infinity must match exactly: atol + rtol * |inf| would accept any value
        idx = tuple(int(i) for i in np.argwhere(other_inf)[0])
        raise AssertionError(tr("{what} holds {got} at index {idx} where {expected} was expected ({count} of {size} "
                                "entries differ; an infinity must come out exactly: same sign, same "
                                "place).{hint}",
                                what=what, got=_fmt(array[idx]), idx=idx, expected=_fmt(expected[idx]),
                                count=int(other_inf.sum()), size=other_inf.size, hint=hint))
    wide = array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)
    a = np.where(same_inf | (got_nan & want_nan), 0.0, wide)
    e = np.where(same_inf | (got_nan & want_nan), 0.0, expected.astype(a.dtype))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a - e)
        bad = ~(err <= atol + rtol * np.abs(e))
    if bad.any():
        score = np.where(bad, np.nan_to_num(err, nan=np.inf, posinf=np.inf), -1.0)
        idx = np.unravel_index(int(np.argmax(score)), score.shape) if score.ndim else ()
        where = tr(" at index {index}", index=tuple(int(i) for i in idx)) if idx else ""
        raise AssertionError(
            tr("{what} is off by {difference}{where}: got {got}, expected {expected} "
               "({count} of {size} entries differ beyond atol={atol}, rtol={rtol}).{hint}",
               what=what, difference=_fmt(err[idx]), where=where, got=_fmt(array[idx]),
               expected=_fmt(expected[idx]), count=int(bad.sum()), size=bad.size,
               atol=f"{atol:g}", rtol=f"{rtol:g}", hint=hint))
    return array


@contextlib.contextmanager
def raises_student(exc_type: type = Exception, what: str = tr("the call")):
    """Expect the student's code to raise ``exc_type`` (checked by name through the boundary)."""
    try:
        yield
    except StudentError as exc:
        if exc.kind != "error" or exc_type.__name__ not in exc.mro_names:
            # i18n: {expected} and {exception} are names of Python exceptions (e.g. ValueError); {message} is what the
            # raised one says, as the student's code wrote it.
            raise AssertionError(tr("{what} should raise {expected}, but raised {exception}: "
                                    "{message}",
                                    what=what, expected=exc_type.__name__, exception=exc.type_name,
                                    message=exc.message)) from None
        return
    # i18n: {expected} is the name of a Python exception (e.g. ValueError).
    raise AssertionError(tr("{what} should raise {expected}, but returned normally",
                            what=what, expected=exc_type.__name__))


def _float_array(value):
    """``value`` as a float64 array, or None if it is not numeric."""
    try:
        return np.asarray(_to_numpy(value), dtype=np.float64)
    except (TypeError, ValueError):
        return None


def matches(actual, candidate, atol: float = 1e-7, rtol: float = 1e-6) -> bool:
    """Whether ``actual`` equals ``candidate`` (same shape, close values, NaN where ``candidate`` has NaN);
    False if either is not numeric."""
    a, c = _float_array(actual), _float_array(candidate)
    return (a is not None and c is not None and a.shape == c.shape
            and bool(np.allclose(a, c, atol=atol, rtol=rtol, equal_nan=True)))


def which_mistake(actual, mistakes=(), hint: str = "", *, expected=None, match_atol: float = 1e-7,
                  match_rtol: float = 1e-6, match_fraction: float = 0.0, finite: bool = False) -> str:
    """The description of the first catalogued mistake that ``actual`` reproduces, else ``hint``.

    ``mistakes`` maps a description of each mistake (the feedback that names it and its usual
    cause) to the value that mistake gives on the test's input, in the order they are tried; a
    list of ``(description, value)`` pairs does the same when one description covers several
    values. A value may be a function of no arguments, called (in this trusted process) only
    when needed; one that raises or gives None is simply not the mistake.

    ``actual`` reproduces a value when the shapes agree and every entry is within
    ``match_atol + match_fraction * miss + match_rtol * |value|`` of it, ``miss`` being the
    largest error of ``actual`` against ``expected`` (so ``match_fraction=0.2`` names a mistake
    only when it is five times closer to the result than the expected value is). With
    ``finite`` a result holding NaN or inf is never taken for a mistake; without it, NaN
    matches NaN.

    A mistake is named only when the evidence supports it: where its value differs from
    ``expected`` (when given), at least one such entry must be a number the result reproduces,
    not a NaN. A NaN appears for many reasons (an all -inf slice, an overflow), so a mistake whose
    only difference from the right answer is where NaN falls is not told apart from another
    one that gives the same NaN; the ``hint`` is said instead.
    """
    a = _float_array(actual)
    if a is None or (finite and not np.isfinite(a).all()):
        return hint
    e = _float_array(expected) if expected is not None else None
    atol = match_atol
    if match_fraction:
        if e is None or e.shape != a.shape:
            return hint
        atol += match_fraction * float(np.abs(a - e).max(initial=0.0))
    for description, value in (mistakes.items() if isinstance(mistakes, dict) else mistakes):
        if callable(value):
            try:
                with np.errstate(all="ignore"):
                    value = value()
            except Exception:  # noqa: BLE001 - a mistake that cannot be formed here is simply not this one
                continue
        if value is not None and matches(a, value, atol=atol, rtol=match_rtol) and _shows(value, e):
            return description
    return hint


def _shows(value, expected) -> bool:
    """Whether a mistake's ``value`` differs from ``expected`` somewhere other than by a NaN (so that
    reproducing it is evidence of that mistake); True when there is nothing to compare with."""
    v = _float_array(value)
    if expected is None or v is None or v.shape != expected.shape:
        return v is None or not np.isnan(v).all()
    with np.errstate(invalid="ignore"):
        differs = ~((v == expected) | (np.isnan(v) & np.isnan(expected)))
    return bool((differs & ~np.isnan(v)).any())


def assert_matches(actual, expected, *, what: str = tr("the result"), atol: float = 1e-8, rtol: float = 1e-6,
                   mistakes=(), hint: str = "", match_atol: float = 1e-7, match_rtol: float = 1e-6,
                   match_fraction: float = 0.0, finite: bool = False) -> np.ndarray:
    """``assert_close`` that, when the result is wrong, names the catalogued mistake it reproduces.

    The message is assert_close's (shape, or the largest error, its index, what was got and
    expected, how many entries differ), followed by the description of the first mistake in
    ``mistakes`` that the result reproduces, or by ``hint`` (what the value should be, the usual
    cause) when none does. ``mistakes``, ``match_atol``, ``match_rtol`` and ``match_fraction``
    are those of :func:`which_mistake`, which is only consulted on failure.

    ``finite``: the result must be finite. A NaN or inf anywhere fails, with where it is and
    how many entries are not finite, and such a result is never taken for a mistake.
    """
    array = assert_shape(actual, np.shape(_to_numpy(expected)), what)
    if finite and not np.isfinite(array).all():
        bad = ~np.isfinite(array)
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        kind = "NaN" if np.isnan(array[idx]) else f"{_fmt(array[idx])}"
        where = tr(" at index {idx}", idx=idx) if idx else ""
        raise AssertionError(join([
            tr("{what} contains {kind}{where} where {expected} was expected ({count} of {size} entries are NaN or "
               "infinite; the result must be finite).", what=what, kind=kind, where=where,
               expected=_fmt(np.asarray(_to_numpy(expected))[idx]), count=int(bad.sum()), size=bad.size),
            hint], sep=" "))
    try:
        return assert_close(array, expected, what=what, atol=atol, rtol=rtol)
    except AssertionError as exc:
        named = which_mistake(array, mistakes, hint, expected=expected, match_atol=match_atol,
                              match_rtol=match_rtol, match_fraction=match_fraction, finite=finite)
        raise AssertionError(join([of(exc), named], sep=" ")) from None


# ---------------------------------------------------------------- inputs left unchanged (course-api.md, every stage)

INPUTS_RULE = tr("No function may modify the arrays, tensors or lists it is given: the caller still needs them.")
IN_PLACE_CAUSES = {
    "array": tr("The usual cause is an in-place operation on the argument: x -= m, x /= s, x[...] = v, np.exp(x, "
                "out=x) or x.shape = ...; write x = x - m instead, or work on x.copy()."),
    "tensor": tr("The usual cause is an in-place operation on the argument: a method whose name ends in _ "
                 "(masked_fill_, unsqueeze_, add_, fill_), +=, or assigning into a slice; use the out-of-place "
                 "form (masked_fill, unsqueeze, x = x + y) or work on x.clone()."),
    "list": tr("The usual cause is list.sort(), .append(), .extend(), .pop(), .reverse() or item assignment on "
               "the argument; use sorted(x), x + [...], or work on list(x)."),
}


def assert_inputs_unchanged(who: str, sent: dict, after, names: list | None = None) -> None:
    """After a call of the student's code: every array, tensor, list and dict the suite gave it must hold
    what it held, with the same values, dtype and shape. ``sent``: ``{"args": [...], "kwargs": {...}}``, the
    copies the suite kept; ``after``: the same arguments as the call left them, sent back by the worker through
    the protocol (grader/sandbox/runtime.py), compared here and nowhere else; ``names``: the parameters the
    positional arguments fill. Raises an AssertionError that names the function, the input and the first
    difference, e.g. ``softmax changed its input x in place: x[0, 2] was ...``."""
    if isinstance(after, dict) and "unsendable" in after:
        raise AssertionError(tr("{who} put something into one of its inputs that cannot be sent back ({error}). "
                                "{inputs_rule}", who=who, error=str(after["unsendable"]), inputs_rule=INPUTS_RULE))
    if not (isinstance(after, dict) and isinstance(after.get("args"), list) and isinstance(after.get("kwargs"), dict)
            and len(after["args"]) == len(sent["args"]) and set(after["kwargs"]) == set(sent["kwargs"])):
        raise AssertionError(tr("{who}: the arguments of the call did not come back from the worker as they were "
                                "sent, so the grader cannot check that they were left unchanged (was the "
                                "grader's worker code changed?).", who=who))
    change = _find_change(sent["args"], after["args"], ["args"]) or _find_change(sent["kwargs"], after["kwargs"],
                                                                                 ["kwargs"])
    if change:
        where, difference, kind = change
        # i18n: {difference} says how the input changed (its own message); {inputs_rule} and {causes} are sentences.
        raise AssertionError(tr("{who} changed its input {name} in place: {difference}. {inputs_rule} "
                                "{causes}",
                                who=who, name=_display(where, names or []), difference=difference,
                                inputs_rule=INPUTS_RULE, causes=IN_PLACE_CAUSES[kind]))


def _find_change(before, after, where: list):
    """(where, how ``after`` differs from ``before`` in words, the kind of input) of the first difference
    inside ``before`` (arrays, tensors, lists, tuples and dicts, nested freely), or None."""
    if isinstance(before, np.ndarray) or _is_tensor(before):
        difference, kind = _difference(before, after)
        return (where, difference, kind) if difference else None
    if isinstance(before, (list, tuple)):
        if type(after) is not type(before):
            return where, tr("it is no longer a list") if isinstance(before, list) else tr("it is no longer a "
                                                                                           "tuple"), "list"
        if len(after) != len(before):
            return where, tr("it held {before} items before the call and holds {after} after",
                             before=len(before), after=len(after)), "list"
        return next((c for i, (b, a) in enumerate(zip(before, after)) if (c := _find_change(b, a, [*where, i]))),
                    None)
    if isinstance(before, dict):
        if not isinstance(after, dict) or set(after) != set(before):
            return where, tr("its keys were {before} before the call and are {after} after",
                             before=_short(sorted(before)), after=_short(
                                 sorted(after) if isinstance(after, dict) else after)), "list"
        return next((c for k, b in before.items() if (c := _find_change(b, after[k], [*where, k]))), None)
    same = _plain_kind(after) == _plain_kind(before) and (after == before or (isinstance(before, float)
                                                                             and before != before and after != after))
    return None if same else (where, tr("it was {before} before the call and is {after} after",
                                        before=_short(before), after=_short(after)), "list")


def _plain_kind(value):
    """The kind a plain value keeps across the protocol (a ``tr`` text is a str, a numpy float a float)."""
    return next((kind for kind in (bool, int, float, complex, str) if isinstance(value, kind)), type(value))


def _display(where: list, names: list) -> str:
    """``["args", 0, 2]`` -> ``x[2]`` (the parameter's name); a probe's forward calls (``["kwargs", "calls", 0,
    "args", 1]``) -> ``argument 2 of forward call 1``, ``["kwargs", "calls", 0, "kwargs", "labels"]`` ->
    ``labels (forward call 1)``; other probe arguments -> ``state_dict['w_q.weight']``."""
    head, key, *rest = where
    if head == "kwargs" and key == "calls" and len(rest) >= 3 and rest[1] in ("args", "kwargs"):
        call, kind, name, *deeper = rest
        base = f"argument {name + 1}" if kind == "args" else str(name)
        return base + "".join(f"[{r!r}]" for r in deeper) + (f" of forward call {call + 1}" if kind == "args"
                                                             else f" (forward call {call + 1})")
    named = isinstance(key, int) and key < len(names) and isinstance(names[key], str)
    base = (names[key] if named else f"argument {key + 1}") if head == "args" else str(key)
    return base + "".join(f"[{r!r}]" for r in rest)


def _is_tensor(value) -> bool:
    return "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor)


def _difference(before, after):
    """(how the array or tensor ``after`` differs from ``before`` in words, or "" if it does not; the kind)."""
    kind = "tensor" if _is_tensor(before) else "array"
    if not (isinstance(after, np.ndarray) or _is_tensor(after)):
        return tr("it is no longer a tensor") if kind == "tensor" else tr("it is no longer an array"), kind
    if str(after.dtype) != str(before.dtype):
        return tr("its dtype was {before} before the call and is {after} after",
                  before=before.dtype, after=after.dtype), kind
    b, a = np.asarray(_to_numpy(before)), np.asarray(_to_numpy(after))
    if b.shape != a.shape:
        return tr("its shape was {before} before the call and is {after} after",
                  before=b.shape, after=a.shape), kind
    with np.errstate(invalid="ignore"):
        differs = ~((b == a) | (np.isnan(b) & np.isnan(a)) if b.dtype.kind in "fc" else (b == a))
    if not differs.any():
        return "", kind
    idx = tuple(int(i) for i in np.argwhere(differs)[0])
    at = tr("at index {index} ", index=list(idx)) if idx else ""
    # i18n: {at} is " at index (i, j)" (its own message) or empty; {before} and {after} are that entry's values; {count}
    # of {size}: how many of the entries changed.
    return (tr("{at}it held {before} before the call and holds {after} after ({count} "
               "of {size} entries changed)",
               at=at, before=_entry(b[idx]), after=_entry(a[idx]),
               count=int(differs.sum()), size=differs.size)), kind


def _entry(x) -> str:
    return str(x) if np.asarray(x).dtype.kind in "biu" else f"{x:.6g}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------- sizes of one, and calls in a row

@dataclass(frozen=True)
class Axis:
    """One size a contract function's inputs have: its name in messages, a small and a large value, and
    what a size of one means (``one="one query"``), or None where the contract does not allow 1."""
    name: str
    small: int
    large: int
    one: str | None = None


@dataclass(frozen=True)
class SizeCall:
    sizes: dict   # axis name -> size
    label: str    # which call it is, for the feedback
    cause: str    # the usual cause when this call alone goes wrong


SIZE_ONE_CAUSE = (tr("Right for other sizes but wrong when an axis has size 1: the usual cause is squeeze() (or "
                     "indexing [0], or reshape with a size read from elsewhere) dropping or mixing up that axis; "
                     "squeeze only the axis you mean, or none."))
IN_A_ROW_CAUSE = (tr("Right on one call but wrong on a later call with other sizes: something is kept between "
                     "calls (a table, mask or size cached in a module-level variable or on the object at the "
                     "first call, or a generator ignored); compute it from each call's own inputs."))
FIRST_CALL_CAUSE = (tr("If this function passes the other tests, the usual cause is something kept between "
                       "calls: a table, mask or size cached in a module-level variable or on the object by an "
                       "earlier call, or a generator ignored; compute it from each call's own inputs."))


def size_calls(axes) -> list:
    """The calls every contract function with sized inputs gets: three in a row with every axis small, then
    large, then small again (a later call must not see the sizes of an earlier one), then, for each axis that
    may be 1, one call with that axis at 1 and the others small."""
    def show(sizes):
        return ", ".join(f"{a.name}={sizes[a.name]}" for a in axes)
    small = {a.name: a.small for a in axes}
    large = {a.name: a.large for a in axes}
    # i18n: {small} and {large} are the sizes of a call's inputs, e.g. "n=3, d=4".
    calls = [SizeCall(small, tr("on a call with {small}", small=show(small)), FIRST_CALL_CAUSE),
             SizeCall(large, tr("on a call with {large}, right after one with {small}",
                                large=show(large), small=show(small)), IN_A_ROW_CAUSE),
             SizeCall(small, tr("on a call with {small}, right after one with {large}",
                                small=show(small), large=show(large)), IN_A_ROW_CAUSE)]
    for a in axes:
        if a.one is not None:
            sizes = {**small, a.name: 1}
            calls.append(SizeCall(sizes, f"with {a.name}=1 ({a.one}; {show(sizes)})", SIZE_ONE_CAUSE))
    return calls


def check_sizes(axes, run, check, *, what: str, together: bool = False) -> None:
    """Call a contract function (or module) at every size of :func:`size_calls` and check each result.

    ``axes``: its :class:`Axis` list; ``run(list of sizes dicts) -> list of results`` makes the calls
    (with ``together``, once with all of them, e.g. forward calls in a row on one module instance in
    one probe; otherwise once per call, in order, on the same worker); ``check(result, sizes)`` raises
    an AssertionError when a result is wrong (the suite's usual comparison with the reference). A wrong
    result (a failure) or a crash (still the student's error) is reported with the call's sizes, where it
    came in the row, and the usual cause."""
    calls = size_calls(axes)
    if together:
        try:
            results = run([c.sizes for c in calls])
        except StudentError as exc:
            # i18n: {sizes} lists the sizes of each call in the row, e.g. [{'n': 3}, {'n': 70}].
            raise _located(exc, tr("{what}, on calls in a row with the sizes {sizes}",
                                   what=what, sizes=[c.sizes for c in calls]),
                           join([IN_A_ROW_CAUSE, SIZE_ONE_CAUSE], sep=" ")) from None
    for i, c in enumerate(calls):
        try:
            result = results[i] if together else run([c.sizes])[0]
            check(result, c.sizes)
        except StudentError as exc:
            raise _located(exc, join([what, c.label], sep=" "), c.cause) from None
        except AssertionError as exc:
            problem = of(exc)
            if not problem.rstrip().endswith("."):
                problem = join([problem, "."], sep="")
            raise AssertionError(tr("{what} {when}: {problem} {cause}", what=what, when=c.label, problem=problem,
                                    cause=c.cause)) from None


def _located(exc: StudentError, where: str, cause: str) -> StudentError:
    """The same error of the student's (same status), its message saying at which sizes it came and the usual cause."""
    if exc.kind is not ReplyKind.ERROR:
        return exc
    return StudentError(failure(exc.kind, tr("{message} ({where}. {cause})", message=exc.message, where=where,
                                             cause=cause), type=exc.type_name, mro=exc.mro_names, where=exc.where),
                        exc.what)


def in_groups(batch, key, run_group) -> list:
    """The results of ``run_group(group)`` for each run of consecutive sizes in ``batch`` that share
    ``key(sizes)`` (a module's constructor sizes), in order: calls in a row go to one module instance
    wherever their sizes allow it."""
    results, group = [], []
    for sizes in batch:
        if group and key(group[0]) != key(sizes):
            results += run_group(group)
            group = []
        group.append(sizes)
    return results + (run_group(group) if group else [])


# What a value of a returned tuple is called in the feedback (a contract function returns at most a few).
RETURNED_VALUES = (tr("the first value it returns"), tr("the second value it returns"),
                   tr("the third value it returns"), tr("the fourth value it returns"))


def check_function_sizes(call, reference_fn, axes, make, *, what: str, atol: float = 1e-8, rtol: float = 1e-6,
                         compare=None) -> None:
    """:func:`check_sizes` for a function the suite calls directly: ``make(sizes) -> args`` builds its
    inputs, ``call(*args)`` is the student's function and ``reference_fn(*args)`` the expected value; each
    result (each element of a tuple) is compared with :func:`assert_close`, or with ``compare(got, expected,
    args)`` where the suite needs its own comparison."""
    def run(batch):
        out = []
        for sizes in batch:
            args = make(sizes)
            out.append((args, call(*args)))
        return out

    def check(pair, _sizes):
        args, got = pair
        expected = reference_fn(*args)
        if compare is not None:
            compare(got, expected, args)
        elif isinstance(expected, tuple):
            if not isinstance(got, (tuple, list)) or len(got) != len(expected):
                # i18n: {type} is the name of a Python type (e.g. Tensor, NoneType).
                raise AssertionError(tr("it returned {type}, expected {count} values",
                                        type=type(got).__name__, count=len(expected)))
            for i, (g, e) in enumerate(zip(got, expected)):
                assert_close(g, e, what=RETURNED_VALUES[i],
                             atol=atol, rtol=rtol)
        else:
            assert_close(got, expected, what=tr("the result"), atol=atol, rtol=rtol)

    check_sizes(axes, run, check, what=what)


def reference_cpu_seconds(fn, *args, repeat: int = 1) -> float:
    """Best CPU time of ``fn(*args)`` in this thread, with BLAS on one thread as in the worker: the same
    clock as the worker's (CPU time, not wall time), so a busy machine moves both alike."""
    try:
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(limits=1)
    except ImportError:  # without it the reference can only be slower, i.e. the test more lenient
        limit = contextlib.nullcontext()
    with limit:
        best = float("inf")
        for _ in range(repeat):
            start = cputime.own_cpu_seconds()
            fn(*args)
            best = min(best, cputime.own_cpu_seconds() - start)
    return best


@dataclass(frozen=True)
class Slowdown:
    """What a speed test compares, in CPU seconds (the best of its calls): the student's function, the
    reference's, and ``handling``, what receiving the arguments and returning them and a result of the same shape
    cost in the control worker (the part of the worker's request that is not the student's)."""
    student: float
    reference: float
    handling: float

    @property
    def ratio(self) -> float:
        return self.student / max(self.reference, 1e-9)

    def allowed(self, limit: float) -> float:
        """The most CPU seconds the student's function may take: ``limit`` times the reference, and the handling
        once more (see :meth:`within`)."""
        return limit * self.reference + self.handling

    def within(self, limit: float) -> bool:
        """At most ``limit`` times the reference, with the handling's cost once more as slack: the student's
        time is its worker's request less the control worker's same request, two processes whose cost for the
        same bytes differs, on a loaded machine by up to about that cost (measured: benchmarks/README.md). A
        Python loop over thousands of rows costs several times that slack."""
        return self.student <= self.allowed(limit)

    def said(self, limit: float):
        """The comparison in words, for a failure's feedback."""
        # i18n: {student_ms}, {reference_ms} and {handling_ms} are CPU times in milliseconds; {ratio} and {limit}
        # are factors (how many times slower than the reference).
        return tr("{student_ms} ms of CPU time, {ratio}x the reference's {reference_ms} ms (allowed: {limit}x, and "
                  "{handling_ms} ms more, what receiving and returning the data costs)",
                  student_ms=f"{self.student * 1e3:.1f}", ratio=f"{self.ratio:.0f}",
                  reference_ms=f"{self.reference * 1e3:.2f}", limit=f"{limit:.0f}",
                  handling_ms=f"{self.handling * 1e3:.1f}")


def cpu_slowdown(student, name: str, reference_fn, inputs: list, check) -> Slowdown:
    """The student's best CPU seconds for ``name`` over ``inputs`` (one argument tuple per call, each fresh: a
    module may remember answers it gave), the reference's, and the handling of the data. The student's time is
    read from outside its worker (``student.timed``), never from the worker: the best request less the best
    request without the call in the control worker (each best of its own, so a single noisy request on either
    side does not decide). ``check(value, args)`` checks each timed result, so a wrong answer returned fast does
    not count."""
    used, handling, best_reference = [], [], float("inf")
    for args in inputs:
        value, seconds, overhead = student.timed(name, *args)
        check(value, args)
        used.append(seconds)
        handling.append(overhead)
        best_reference = min(best_reference, reference_cpu_seconds(reference_fn, *args, repeat=5))
    return Slowdown(max(0.0, min(used) - min(handling)), best_reference, min(handling))


def probe_tensor(value, what: str, hint: str = "") -> np.ndarray:
    """A tensor a probe sent back, as an array; if the student's code returned something
    else, the probe sent ``{"not_a_tensor": type}`` and this says so in words."""
    if isinstance(value, dict) and "not_a_tensor" in value:
        raise AssertionError(join([tr("{what} returned a {kind}, not a tensor", what=what, kind=value["not_a_tensor"]),
                                   hint], sep="; "))
    return as_array(value, what)


def check_weights_loaded(reply: dict, kind: str, contract: str, note: str = "") -> None:
    """Fail with the contract's names when a probe could not load the test's weights into ``kind``."""
    if reply.get("load_error"):
        raise AssertionError(tr("the contract's weights could not be loaded into your {kind}: "
                                "{error} (names and shapes of the contract: {contract})",
                                kind=kind, error=reply['load_error'][:400], contract=contract))
    if reply.get("missing") or reply.get("unexpected"):
        raise AssertionError(tr("your {kind} does not have the contract's parameters: missing {missing}, "
                                "unexpected {unexpected} (names of the contract: {contract}{note})",
                                kind=kind, missing=reply['missing'][:6],
                                unexpected=reply['unexpected'][:6], contract=contract, note=note))


def assert_value_error(outcome: dict, what: str, numbers) -> None:
    """Fail unless one call's outcome, as a probe's ``errors`` records it (``{"raised": type name or "", "mro":
    [names], "message": str}``), is a ValueError whose message names one of ``numbers`` (sizes of the shapes,
    as text: "12", "(2, 3, 5)"), as the contract asks of bad arguments."""
    if not outcome["raised"]:
        raise AssertionError(tr("{what} should raise ValueError naming the shapes, but returned normally",
                                what=what))
    if "ValueError" not in outcome["mro"]:
        raise AssertionError(tr("{what} should raise ValueError (with a message naming the shapes), but raised "
                                "{exception}: {message}. Check the shapes first and raise "
                                "ValueError yourself.",
                                what=what, exception=outcome['raised'],
                                message=outcome['message'][:300]))
    if not any(re.search(rf"(?<!\d){re.escape(n)}(?!\d)", outcome["message"]) for n in numbers):
        raise AssertionError(tr("{what} raised ValueError, but its message does not name the shapes: "
                                "{message}",
                                what=what, message=f"{outcome['message'][:200]!r}"))


def load_trained(model, state: dict, what: str):
    """``model`` (a reference module built here) in eval mode with the weights a student's code trained in
    the worker (``state``: its ``state_dict`` as a probe sent it), loaded by the contract's names. The test
    then runs the trained weights itself, so no answer it scores comes from the student's code directly
    (which could have looked it up). Every parameter must be there with its shape; a buffer of another
    shape (a layout of the student's own) keeps the reference's."""
    import torch
    own = model.state_dict()
    params = {name for name, _ in model.named_parameters()}
    shapes = {k: tuple(np.shape(v)) for k, v in state.items() if not isinstance(v, dict)}
    missing = sorted(params - set(shapes))
    wrong = sorted(f"{k} {shapes[k]} (expected {tuple(own[k].shape)})"
                   for k in params & set(shapes) if shapes[k] != tuple(own[k].shape))
    if missing or wrong:
        raise AssertionError(tr("{what}: the trained model's state_dict does not hold the contract's parameters "
                                "(missing {missing}, other shapes {wrong_shapes}); the grader runs the trained "
                                "weights by these names.", what=what, missing=missing[:6], wrong_shapes=wrong[:3]))
    model.load_state_dict({k: torch.as_tensor(as_array(state[k], k)) for k in own
                           if k in shapes and shapes[k] == tuple(own[k].shape)}, strict=False)
    return model.eval()


def learning_parameters(model, loss, floor: float = 1e-5) -> list:
    """The names of ``model``'s parameters that require a gradient and get one above ``floor`` (largest entry) from
    ``loss`` (a scalar computed from ``model``): those a correct training must change. A parameter whose gradient
    is only rounding (a key bias, which softmax ignores since it shifts every score alike) is left out: Adam may move
    it, and need not."""
    import torch
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    return [name for (name, _), g in zip(named, grads) if g is not None and float(g.abs().max()) > floor]


def untrained_cause(still: list, reply: dict, otherwise: str) -> str:
    """Why the parameters ``still`` of a training probe's model (``reply``: its ``frozen`` and ``buffers``, the names
    of its parameters that require no gradient and of its buffers) never changed, else ``otherwise``."""
    buffers = [name for name in still if name in set(reply.get("buffers") or [])]
    if buffers:
        return tr("{names} are buffers in your model (register_buffer), where the contract has parameters: make them "
                  "nn.Parameter, so that the optimiser trains them.", names=buffers[:4])
    frozen = [name for name in still if name in set(reply.get("frozen") or [])]
    if frozen:
        return tr("{names} require no gradient in your model (requires_grad_(False)), as if they were frozen: every "
                  "parameter of the contract trains.", names=frozen[:4])
    return otherwise


def assert_trains_like(trained, reference, *, what: str, losses, expected_losses, start: dict, learning: list,
                       outputs, atol: float, hint: str, unchanged_cause, mistakes: dict | None = None) -> None:
    """A training of the student's code against the same training done by the reference, from the same start
    (``start``: the state_dict both began with): ``trained`` is a reference module holding the student's trained
    weights (``load_trained``), ``reference`` the reference's own result. Every parameter in ``learning``
    (``learning_parameters``) must have changed (else ``unchanged_cause(names)`` says why they may not have); the
    losses the training reported must match ``expected_losses``, and ``outputs(trained)`` those of ``reference`` (a
    forward run here), to ``atol``. ``mistakes`` maps the text naming a known wrong training to a function giving its
    (losses, trained model): a result that reproduces one is named."""
    import torch
    state = trained.state_dict()
    still = [name for name in learning if torch.equal(state[name], start[name])]
    if still:
        raise AssertionError(tr("{what}: {count} parameters with a gradient never changed, e.g. {names}. {cause}",
                                what=what, count=len(still), names=still[:4], cause=unchanged_cause(still)))
    replays = {}

    def replay(text):
        if text not in replays:
            replays[text] = mistakes[text]()
        return replays[text]

    def run(model):
        with torch.no_grad():
            return outputs(model)

    mistakes = mistakes or {}
    # a wrong training is named when the result is five times closer to it than to the right one (as the
    # student's own version of the mistake may differ from the replay like two correct trainings do)
    match = dict(match_atol=atol / 10, match_rtol=0, match_fraction=0.2, finite=True)
    assert_matches(np.asarray(losses, dtype=float), np.asarray(expected_losses, dtype=float), atol=atol, rtol=0,
                   what=tr("{what}: the list of losses", what=what), hint=hint, **match,
                   mistakes={t: (lambda t=t: np.asarray(replay(t)[0], dtype=float)) for t in mistakes})
    assert_matches(run(trained), run(reference), what=tr("{what}: the output of the trained weights", what=what),
                   atol=atol, rtol=0, hint=hint, **match,
                   mistakes={t: (lambda t=t: run(replay(t)[1])) for t in mistakes})


def randomise_norms_and_biases(module, seed: int, bias_scale: float = 0.3, embedding_scale: float | None = None):
    """Give a freshly built torch module reproducible weights where torch's initialisation is
    trivial, so that a missing or swapped LayerNorm or bias shows: norm weights 1 + 0.3 N(0, 1)
    instead of 1, biases ``bias_scale`` N(0, 1) instead of 0 and, with ``embedding_scale``, the
    embedding tables too. Drawn in parameter order from a generator seeded with ``seed``."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if embedding_scale is not None and "embeddings" in name:
                p.copy_(embedding_scale * torch.randn(p.shape, generator=gen))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(bias_scale * torch.randn(p.shape, generator=gen))


def seeded_randn(*shape, seed: int):
    """A torch tensor of standard normal numbers that depends only on ``seed``."""
    import torch
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
