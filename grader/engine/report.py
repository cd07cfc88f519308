"""Building the schema-v1 score report from a pytest-json-report file."""
from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field, fields
from enum import Enum
from fractions import Fraction
from functools import lru_cache

from ..i18n import join, tr
from ..i18n.message import from_json
from . import paths, stages


class TestStatus(str, Enum):
    """A test's status in the report."""
    __test__ = False  # not a pytest test class
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    MISSING = "missing"


class StageStatus(str, Enum):
    """A stage's status in the report."""
    GRADED = "graded"
    MISSING = "missing"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


@dataclass
class TestResult:
    """One test case of the report (``stages[].tests[]``)."""
    __test__ = False  # not a pytest test class
    id: str                   # "a02_softmax::test_x[case]"
    name: str
    score: float
    max_score: float
    status: TestStatus
    visibility: str           # visible | hidden | after_due_date (stage.toml)
    feedback: str
    duration_s: float

    def to_json(self) -> dict:
        return {**vars(self), "status": self.status.value}

    @classmethod
    def from_json(cls, data: dict) -> TestResult:
        return cls(**{**data, "status": TestStatus(data["status"])})


@dataclass
class StageResult:
    """One stage of the report (``stages[]``)."""
    id: str
    title: str
    score: float
    max_score: float
    status: StageStatus
    tests: list[TestResult]
    bonus: bool = False
    message: str = ""
    earlier: list[dict] = field(default_factory=list)  # earlier.EarlierModule.to_json(), in course order
    import_error: str = ""    # the module could not be imported: the error's first line, as Python gave it

    def to_json(self) -> dict:
        entry = {"id": self.id, "title": self.title, "score": self.score, "max_score": self.max_score,
                 "status": self.status.value, "tests": [t.to_json() for t in self.tests]}
        if self.bonus:
            entry["bonus"] = True
        if self.message:
            entry["message"] = self.message
        if self.earlier:
            entry["earlier"] = list(self.earlier)
        if self.import_error:
            entry["import_error"] = self.import_error
        return entry

    @classmethod
    def from_json(cls, data: dict) -> StageResult:
        return cls(**{**data, "status": StageStatus(data["status"]),
                      "tests": [TestResult.from_json(t) for t in data["tests"]]})


@dataclass
class Report:
    """The schema-v1 score report (``grader/engine/schema/report-v1.schema.json``): built here, read
    with :meth:`from_json` wherever a report comes back from a file, the gradebook or a worker process.
    ``submission``, ``isolation``, ``environment`` and ``late`` are owned by the modules that make them
    (submission.Intake, isolation.Isolation.describe, environment(), classroom.late) and kept as JSON."""
    kind: str                 # hidden | public
    submission: dict
    stages: list[StageResult]
    errors: list[str]
    isolation: dict
    environment: dict
    duration_s: float
    seed: int | None = None
    late: dict | None = None
    language: str | None = None   # en | ko | both: what its student-facing text is in (absent before issue 24)
    schema_version: int = 1

    @property
    def core(self) -> list[StageResult]:
        return [s for s in self.stages if not s.bonus]

    @property
    def bonus(self) -> list[StageResult]:
        return [s for s in self.stages if s.bonus]

    @property
    def score(self) -> float:
        return exact_sum(s.score for s in self.core)

    @property
    def max_score(self) -> float:
        return exact_sum(s.max_score for s in self.core)

    @property
    def bonus_score(self) -> float:
        return exact_sum(s.score for s in self.bonus)

    @property
    def bonus_max_score(self) -> float:
        return exact_sum(s.max_score for s in self.bonus)

    def to_json(self) -> dict:
        data = {"schema_version": self.schema_version, "kind": self.kind,
                **({"language": self.language} if self.language is not None else {}), "submission": self.submission,
                **({"seed": int(self.seed)} if self.seed is not None else {}),
                "score": self.score, "max_score": self.max_score, "stages": [s.to_json() for s in self.stages],
                "errors": list(self.errors), "isolation": self.isolation, "environment": self.environment,
                "duration_s": self.duration_s}
        if self.bonus:
            data["bonus_score"], data["bonus_max_score"] = self.bonus_score, self.bonus_max_score
        if self.late is not None:
            data["late"] = self.late
        return data

    @classmethod
    def from_json(cls, data: dict) -> Report:
        """The report in ``data``; its totals are recomputed from its stages (``validate`` checks that
        they agree with the ones written)."""
        known = {f.name for f in fields(cls)} - {"stages"}
        return cls(**{k: v for k, v in data.items() if k in known},
                   stages=[StageResult.from_json(s) for s in data["stages"]])


def _machine() -> dict:
    """Python's version and the platform as ``platform.platform()`` names it on Linux
    (``Linux-6.18.0-x86_64-with-glibc2.36``), without its ``uname -p`` child (5 ms of every ``check``)."""
    u = platform.uname()  # its processor, the field that runs `uname -p`, is left unread
    libc, libc_version = platform.libc_ver()
    return {"python": platform.python_version(),
            "platform": f"{u.system}-{u.release}-{u.machine}" + (f"-with-{libc}{libc_version}" if libc else "")}


def environment() -> dict:
    """Versions from package metadata (importing torch just to read its version costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version
    env = _machine()
    for lib in ("numpy", "torch", "pytest"):
        try:
            env[lib] = version(lib)
        except PackageNotFoundError:
            pass
    return env


def _nodeid_parts(nodeid: str):
    """'tests/hidden/test_a02_softmax.py::test_x[case]' -> ('a02_softmax', 'test_x', 'test_x[case]')."""
    rest = nodeid.partition("::")[2]
    func = rest.split("[", 1)[0].split("::")[-1]
    return stages.suite_stage_id(nodeid), func, rest.split("::")[-1]


def stage_results(stage, kind: str, json_tests: list, events: dict, notes: list,
                  partial: bool = False) -> StageResult:
    """One stage's entry of the report, from pytest-json-report's tests and the plugin's ``events``
    (private/stages.json); ``notes``: the intake's lines about the stage's files. ``partial``: some tests
    were deselected on purpose (only the mutant catalogue does this), so ``max_score`` counts only the
    tests that ran."""
    from grader.sandbox import protocol  # start-up: it imports numpy, which reading a report never needs
    tests = _test_results(stage, kind, json_tests)
    ev = events.get(stage.id, {})
    status, message, import_error = StageStatus.GRADED, "", ""
    if ev.get("timed_out"):
        status, message = StageStatus.TIMEOUT, tr("the stage hit its {seconds} s time limit",
                                                  seconds=f"{stage.time_limit_s:.0f}")
    elif ev.get("load", {}).get("ok") is False and ev.get("crashes"):
        status = StageStatus.CRASHED
    if ev.get("load") and protocol.reply_kind(ev["load"]) is protocol.ReplyKind.LOAD_ERROR:
        error = f"{ev['load'].get('type')}: {ev['load'].get('message')}"
        message = tr("could not import {module}: {error}", module=stage.module_file, error=error)
        import_error = error.strip().splitlines()[0] if error.strip() else "ImportError"
    notes = [*notes, *(from_json(e) for e in ev.get("events", []))]
    if notes:
        message = join([message, *notes])
    earlier = [{**e, "why": from_json(e["why"])} for e in ev.get("earlier", [])]
    return StageResult(stage.id, stage.title, exact_sum(t.score for t in tests),
                       exact_sum(t.max_score for t in tests) if partial else float(stage.points), status, tests,
                       bonus=stage.bonus, message=message, earlier=earlier, import_error=import_error)


def _test_results(stage, kind: str, json_tests: list) -> list[TestResult]:
    """The stage's test cases, each with its share of its test function's points."""
    points = stage.test_points(kind)
    per_func: dict = {}
    for t in json_tests:
        owner, func, _ = _nodeid_parts(t["nodeid"])
        if owner == stage.id:
            per_func.setdefault(func, []).append(t)
    unknown = sorted(set(per_func) - set(points))
    if unknown:
        raise ValueError(f"{stage.id}: tests {unknown} have no points in stage.toml [{kind}]")
    tests = []
    for func, cases in per_func.items():
        share = stages.case_points(points[func], len(cases), f"{stage.toml} [{kind}] {func}")
        for t in cases:
            meta = t.get("metadata", {}).get("grader", {})
            status = meta.get("status") or ("passed" if t["outcome"] == "passed" else "error")
            status = TestStatus(status) if status in TestStatus._value2member_map_ else TestStatus.ERROR
            duration = sum(t.get(phase, {}).get("duration", 0.0) for phase in ("setup", "call", "teardown"))
            feedback = from_json(meta.get("feedback", ""))
            if status is TestStatus.MISSING and not feedback:
                feedback = tr("{module} was not handed in", module=stage.module_file)
            tests.append(TestResult(
                id=f"{stage.id}::{_nodeid_parts(t['nodeid'])[2]}", name=from_json(meta.get("name", func)),
                score=float(share) if status is TestStatus.PASSED else 0.0, max_score=float(share), status=status,
                visibility=stage.tests(kind)[func].visibility, feedback=feedback, duration_s=round(duration, 4)))
    return tests


def zero_stage(stage, kind: str, feedback: str, message: str) -> StageResult:
    """A stage entry in which no test ran: every test at zero with status ``missing`` and the
    same ``feedback``, the stage's ``message`` saying why (not handed in, not graded)."""
    tests = [TestResult(f"{stage.id}::{func}", func, 0.0, float(pts), TestStatus.MISSING,
                        stage.tests(kind)[func].visibility, feedback, 0.0)
             for func, pts in stage.test_points(kind).items()]
    return StageResult(stage.id, stage.title, 0.0, float(stage.points), StageStatus.MISSING, tests,
                       bonus=stage.bonus, message=message)


def assemble(intake, kind: str, stage_entries: list, isolation: dict, duration: float,
             seed: int | None = None, language: str = "en") -> Report:
    """The report of a grading: the intake's submission and lines, its stages, how it was confined;
    ``language``: what its student-facing text will be rendered in (``grader.i18n.localize``)."""
    return Report(kind=kind, submission={"id": intake.id, "path": intake.path, "sha256": intake.sha256,
                                         "format": intake.format.value},
                  stages=stage_entries, errors=intake.lines(), isolation=isolation, environment=environment(),
                  duration_s=round(duration, 3), seed=seed, language=language)


def not_graded(submission: dict, kind: str, chosen, error: str, isolation: dict) -> Report:
    """The report of a submission that could not be graded: every stage at zero, ``error`` as the reason.
    ``environment`` names only Python and the platform: no package took part."""
    why = f"not graded: {error}"
    return Report(kind=kind, submission=submission, stages=[zero_stage(s, kind, why, why) for s in chosen],
                  errors=[error], isolation=isolation,
                  environment=_machine(), duration_s=0.0)


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
    """Raise ``jsonschema.ValidationError`` if the report does not follow schema v1, if
    its points do not add up (each stage's score and max_score must be exactly the sums of
    its tests', the report's those of its core stages, bonus_score and bonus_max_score
    those of its bonus stages; the error names the stage or total that is off), or if it
    does not come back whole through :class:`Report` (the types and the schema kept together)."""
    import jsonschema
    _validator().validate(report)
    for message in _sums_that_do_not_add_up(report):
        raise jsonschema.ValidationError(message)
    try:
        typed = Report.from_json(report).to_json()
    except (TypeError, ValueError) as exc:  # a field the types do not have, a status they do not name
        raise jsonschema.ValidationError(f"the report does not fit report.Report: {exc}") from None
    if typed != report:
        raise jsonschema.ValidationError("the report does not round-trip through report.Report: a field the "
                                         "schema allows is missing from the types, or the other way round")


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
