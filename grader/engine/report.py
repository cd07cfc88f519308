"""Building the schema-v1 score report from a pytest-json-report file."""
from __future__ import annotations

import json
import platform
from fractions import Fraction
from functools import lru_cache

from ..i18n import join, tr
from ..i18n.message import from_json
from . import paths, stages

STATUSES = ("passed", "failed", "error", "timeout", "crashed", "missing")


def environment() -> dict:
    """Versions from package metadata (importing torch just to read its version costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version
    env = {"python": platform.python_version(), "platform": platform.platform()}
    for lib in ("numpy", "torch", "pytest"):
        try:
            env[lib] = version(lib)
        except PackageNotFoundError:
            pass
    return env


def _nodeid_parts(nodeid: str):
    """'tests/hidden/test_a02_softmax.py::test_x[case]' -> ('a02_softmax', 'test_x', 'test_x[case]')."""
    file, _, rest = nodeid.partition("::")
    stage = file.rsplit("/", 1)[-1].removeprefix("test_").removesuffix(".py")
    func = rest.split("[", 1)[0].split("::")[-1]
    return stage, func, rest.split("::")[-1]


def stage_results(stage, kind: str, json_tests: list, events: dict, intake_errors: list,
                  module_present: bool, partial: bool = False) -> dict:
    """One stage's entry of the report. ``partial``: some tests were deselected on
    purpose (only the mutant catalogue does this), so ``max_score`` counts only
    the tests that ran."""
    points = stage.test_points(kind)
    mine = [t for t in json_tests if _nodeid_parts(t["nodeid"])[0] == stage.id]
    per_func: dict = {}
    for t in mine:
        per_func.setdefault(_nodeid_parts(t["nodeid"])[1], []).append(t)
    unknown = sorted(set(per_func) - set(points))
    if unknown:
        raise ValueError(f"{stage.id}: tests {unknown} have no points in stage.toml [{kind}]")
    tests, score, max_score = [], Fraction(0), Fraction(0)
    for func, cases in per_func.items():
        share = stages.case_points(points[func], len(cases), f"{stage.toml} [{kind}] {func}")
        for t in cases:
            meta = t.get("metadata", {}).get("grader", {})
            status = meta.get("status") or ("passed" if t["outcome"] == "passed" else "error")
            if not module_present:
                status = "missing"
            feedback = from_json(meta.get("feedback", ""))
            if status == "missing" and not feedback:
                feedback = tr("{module} was not handed in", module=stage.module_file)
            duration = sum(t.get(phase, {}).get("duration", 0.0) for phase in ("setup", "call", "teardown"))
            got = share if status == "passed" else Fraction(0)
            score, max_score = score + got, max_score + share
            tests.append({
                "id": f"{stage.id}::{_nodeid_parts(t['nodeid'])[2]}",
                "name": from_json(meta.get("name", func)),
                "score": float(got),
                "max_score": float(share),
                "status": status if status in STATUSES else "error",
                "visibility": stage.tests(kind)[func].visibility,
                "feedback": feedback,
                "duration_s": round(duration, 4),
            })
    ev = events.get(stage.id, {})
    status, note = "graded", ""
    if not module_present:
        status, note = "missing", tr("{module} is not in the submission", module=stage.module_file)
    elif ev.get("timed_out"):
        status, note = "timeout", tr("the stage hit its {seconds} s time limit", seconds=f"{stage.time_limit_s:.0f}")
    elif ev.get("load", {}).get("ok") is False and ev.get("crashes"):
        status = "crashed"
    if ev.get("load", {}).get("ok") is False and ev["load"].get("kind") == "load_error":
        note = tr("could not import {module}: {error}", module=stage.module_file,
                  error=f"{ev['load'].get('type')}: {ev['load'].get('message')}")
    notes = [e for e in intake_errors if e.startswith(stage.id)] + [from_json(e) for e in ev.get("events", [])]
    if notes:
        note = join([note, *notes])
    entry = {"id": stage.id, "title": stage.title, "score": float(score),
             "max_score": float(max_score) if partial else float(stage.points),
             "status": status, "tests": tests}
    if stage.bonus:
        entry["bonus"] = True
    if note:
        entry["message"] = note
    if ev.get("earlier"):  # which earlier modules it imported, the student's own or stand-ins, and why
        entry["earlier"] = [{**e, "why": from_json(e["why"])} for e in ev["earlier"]]
    return entry


def zero_stage(stage, kind: str, feedback: str, message: str) -> dict:
    """A stage entry in which no test ran: every test at zero with status ``missing`` and the
    same ``feedback``, the stage's ``message`` saying why (not handed in, not graded)."""
    tests = [{"id": f"{stage.id}::{func}", "name": func, "score": 0.0, "max_score": float(pts),
              "status": "missing", "visibility": stage.tests(kind)[func].visibility,
              "feedback": feedback, "duration_s": 0.0}
             for func, pts in stage.test_points(kind).items()]
    entry = {"id": stage.id, "title": stage.title, "score": 0.0, "max_score": float(stage.points),
             "status": "missing", "message": message, "tests": tests}
    if stage.bonus:
        entry["bonus"] = True
    return entry


def assemble(intake, kind: str, stage_entries: list, errors: list, isolation: dict, duration: float,
             seed: int | None = None, language: str = "en") -> dict:
    core = [s for s in stage_entries if not s.get("bonus")]
    bonus = [s for s in stage_entries if s.get("bonus")]
    report = {
        "schema_version": 1,
        "kind": kind,
        "language": language,
        "submission": {"id": intake.id, "path": intake.path, "sha256": intake.sha256, "format": intake.format},
        **({"seed": int(seed)} if seed is not None else {}),
        "score": exact_sum(s["score"] for s in core),
        "max_score": exact_sum(s["max_score"] for s in core),
        "stages": stage_entries,
        "errors": errors,
        "isolation": isolation,
        "environment": environment(),
        "duration_s": round(duration, 3),
    }
    if bonus:
        report["bonus_score"] = exact_sum(s["score"] for s in bonus)
        report["bonus_max_score"] = exact_sum(s["max_score"] for s in bonus)
    return report


def exact_sum(numbers) -> float:
    """The sum of floats computed exactly (as Fractions) and rounded to a float once.
    Points are multiples of 0.25, so this is the sum itself and ``validate`` finds it equal."""
    return float(sum((Fraction(x) for x in numbers), Fraction(0)))


@lru_cache(maxsize=1)
def _validator():
    import jsonschema
    schema = json.loads(paths.SCHEMA.read_text())
    return jsonschema.Draft202012Validator(schema)


def validate(report: dict) -> None:
    """Raise ``jsonschema.ValidationError`` if the report does not follow schema v1, or if
    its points do not add up: each stage's score and max_score must be exactly the sums of
    its tests', the report's those of its core stages, bonus_score and bonus_max_score
    those of its bonus stages. The error names the stage or total that is off."""
    import jsonschema
    _validator().validate(report)
    for message in _sums_that_do_not_add_up(report):
        raise jsonschema.ValidationError(message)


def _sums_that_do_not_add_up(report: dict) -> list:
    def off(where, key, total, parts, noun):
        exact = sum((Fraction(x) for x in parts), Fraction(0))
        if Fraction(total) == exact:
            return []
        return [f"{where}: {key} is {total!r}, not the exact sum of its {noun}' {key}s ({exact} = {float(exact)!r})"]

    problems = []
    for s in report["stages"]:
        for key in ("score", "max_score"):
            problems += off(f"stage {s['id']}", key, s[key], [t[key] for t in s["tests"]], "tests")
    core = [s for s in report["stages"] if not s.get("bonus")]
    bonus = [s for s in report["stages"] if s.get("bonus")]
    for key in ("score", "max_score"):
        problems += off("the report", key, report[key], [s[key] for s in core], "core stages")
        if bonus and f"bonus_{key}" not in report:
            problems.append(f"the report has bonus stages but no bonus_{key}")
        elif f"bonus_{key}" in report:
            problems += off("the report", f"bonus_{key}", report[f"bonus_{key}"], [s[key] for s in bonus],
                            "bonus stages")
    return problems + _late_that_does_not_add_up(report)


def _late_that_does_not_add_up(report: dict) -> list:
    """The ``late`` object starts from the tests' scores, never raises one, and its totals are its stages'.
    Penalties are shares of a score, so these sums are compared to a billionth of a point."""
    late = report.get("late")
    if not late:
        return []
    tests = {s["id"]: s for s in report["stages"]}
    problems = [f"late: stage {s['id']} starts from {s['score_before']!r}, not the tests' score"
                for s in late["stages"] if s["id"] not in tests or s["score_before"] != tests[s["id"]]["score"]]
    problems += [f"late: stage {s['id']} gains points ({s['score_before']!r} -> {s['score_after']!r})"
                 for s in late["stages"] if s["score_after"] > s["score_before"]]
    if sorted(tests) != sorted(s["id"] for s in late["stages"]):
        problems.append("late: its stages are not the report's")
    core = [s for s in late["stages"] if s["id"] in tests and not tests[s["id"]].get("bonus")]
    for key, total in (("score_before", late["score_before"]), ("score_after", late["score_after"])):
        if abs(sum(s[key] for s in core) - total) > 1e-9:
            problems.append(f"late: {key} {total!r} is not the sum of its core stages'")
    if late["score_before"] != report["score"]:
        problems.append(f"late: score_before {late['score_before']!r} is not the report's score {report['score']!r}")
    if abs(late["score_before"] - late["score_after"] - late["penalty"]) > 1e-9:
        problems.append("late: penalty is not score_before - score_after")
    return problems
