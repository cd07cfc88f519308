"""The stages of the course, read from ``assignments/*/stage.toml``."""
from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path

from ..i18n import tr
from . import paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (requirements.txt)
    import tomli as tomllib

VISIBILITIES = ("visible", "hidden", "after_due_date")
# Every test case is worth a multiple of this: points students read as they are, sums that are exact in floats.
POINTS_QUANTUM = Fraction(1, 4)
# The first lines of every starter file (``make starter``); a notebook holds the file without them.
STARTER_HEADER = ("# Starter code, generated from the reference by `make starter`. Replace every\n"
                  "# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.\n")


@dataclass(frozen=True)
class TestSpec:
    points: Fraction          # the test function's points; its parametrised cases share them equally
    visibility: str = "visible"


@dataclass(frozen=True)
class Stage:
    id: str
    title: str
    points: float
    slides: str = ""
    library: str = "numpy"
    time_limit_s: float = 60.0
    call_timeout_s: float = 10.0  # one call or probe; a hang costs that test, not the stage
    memory_mb: int = 2048         # address-space limit of the worker
    bonus: bool = False
    forbidden: list = field(default_factory=list)
    standins: list = field(default_factory=list)
    hidden: dict = field(default_factory=dict)   # test function name -> TestSpec
    public: dict = field(default_factory=dict)

    # -- its files: every other module asks the stage instead of rebuilding these paths --------
    @property
    def folder(self) -> Path:
        """``assignments/<id>/``: handouts, stage.toml, data, notebook."""
        return paths.ASSIGNMENTS / self.id

    @property
    def toml(self) -> Path:
        return self.folder / "stage.toml"

    @property
    def handouts(self) -> dict:
        """{language: handout}: English and Korean."""
        return {"en": self.folder / "README.md", "ko": self.folder / "README.ko.md"}

    @property
    def notebook(self) -> Path:
        return self.folder / f"{self.id}.ipynb"

    @property
    def module_file(self) -> str:
        """The file name of the stage module in a submission, e.g. ``a02_softmax.py``."""
        return f"{self.id}.py"

    @property
    def solution(self) -> Path:
        return paths.SOLUTIONS / self.module_file

    @property
    def starter(self) -> Path:
        return paths.STARTER / self.module_file

    def suite(self, kind: str) -> Path:
        """The pytest file of the ``hidden`` or ``public`` tests."""
        return (paths.HIDDEN_TESTS if kind == "hidden" else paths.PUBLIC_TESTS) / f"test_{self.id}.py"

    @property
    def hidden_data(self) -> list:
        """Files under ``tests/hidden/data/`` whose name starts with the stage id (a folder counts whole)."""
        found = []
        if paths.HIDDEN_DATA.is_dir():
            for p in sorted(paths.HIDDEN_DATA.iterdir()):
                if p.name.startswith(self.id):
                    found += sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        return found

    @property
    def probes(self) -> Path:
        """``grader/sandbox/probes/<id>.py``: scenarios the torch suites run in the worker (may not exist)."""
        return paths.SANDBOX / "probes" / self.module_file

    @property
    def standin_files(self) -> list:
        """The stand-ins of the earlier stages this one imports."""
        return [paths.SANDBOX / "standins" / f"{name}.py" for name in self.standins]

    def mutants(self, extended: bool = False) -> Path:
        """The catalogue of realistic mistakes: the core one, or the extended one."""
        return paths.MUTANTS / ("extended" if extended else "") / f"{self.id}.toml"

    @property
    def alternatives(self) -> list:
        """Independent correct implementations, each a ``.py`` file that must score full marks."""
        return sorted((paths.ALTERNATIVES / self.id).glob("*.py"))

    @property
    def upstream_variants(self) -> list:
        """Correct implementations that use the freedoms the contract leaves (extra attributes and buffers,
        own helpers and submodules, course-provided code rewritten), each a ``.py`` file that must score
        full marks here and in every stage built on this one; a ``.toml`` beside one re-expresses
        catalogued mistakes on it (``[[mistake]] mutant = "<id>"``, ``edits``)."""
        return sorted((paths.UPSTREAM / self.id).glob("*.py"))

    @property
    def dependents(self) -> list:
        """The stages that import this one (``standins`` names it), in course order."""
        return [s.id for s in all_stages() if self.id in s.standins]

    def grading_files(self) -> list:
        """Everything that decides this stage's grade apart from the submission, where it exists:
        stage.toml, hidden suite, reference, probes, stand-ins, hidden data."""
        candidates = [self.toml, self.suite("hidden"), self.solution, self.probes, *self.standin_files,
                      *self.hidden_data]
        return [p for p in candidates if p.is_file()]

    def tests(self, kind: str) -> dict:
        return self.hidden if kind == "hidden" else self.public

    def test_points(self, kind: str) -> dict:
        """{test function: its points, an exact Fraction}, as stage.toml gives them; they add up to ``points``."""
        return {name: s.points for name, s in self.tests(kind).items()}


def case_points(func_points: Fraction, n_cases: int, where: str) -> Fraction:
    """What each of a test function's ``n_cases`` parametrised cases is worth: an equal share,
    which must be a multiple of POINTS_QUANTUM (else ValueError naming ``where``)."""
    share = Fraction(func_points) / n_cases
    if share % POINTS_QUANTUM:
        raise ValueError(f"{where}: {n_cases} cases share {_show(func_points)} points, {_show(share)} each; "
                         f"a function's points must be a multiple of {_show(POINTS_QUANTUM)} x its number of "
                         f"cases ({_show(POINTS_QUANTUM * n_cases)}) in stage.toml")
    return share


def _show(x: Fraction) -> str:
    return f"{float(x):g}"


def _points(value, where: str) -> Fraction:
    """A number of points from stage.toml, exactly (0.75 is read as 3/4, not as a float's neighbour)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: points must be a number, not {value!r}")
    exact = Fraction(str(value))  # str: the decimal as written, so 0.1 stays 1/10 and is refused below
    if exact <= 0 or exact % POINTS_QUANTUM:
        raise ValueError(f"{where}: points = {value} is not a positive multiple of {_show(POINTS_QUANTUM)}")
    return exact


def _specs(table: dict, where: str, stage_points: Fraction) -> dict:
    """One table of stage.toml, ``test_x = { points = 0.75, visibility = "visible" }`` per test function;
    the points must add up exactly to the stage's."""
    specs = {}
    for name, spec in table.items():
        if not isinstance(spec, dict):
            spec = {"points": spec}
        if "weight" in spec:
            raise ValueError(f"{where}: {name} has a weight; stage.toml gives each test its points instead")
        if "points" not in spec:
            raise ValueError(f"{where}: {name} has no points")
        vis = spec.get("visibility", "visible")
        if vis not in VISIBILITIES:
            raise ValueError(f"{where}: {name} has visibility {vis!r}")
        specs[name] = TestSpec(_points(spec["points"], f"{where}: {name}"), vis)
    total = sum(s.points for s in specs.values())
    if specs and total != stage_points:
        raise ValueError(f"{where}: its tests' points add up to {_show(total)}, not the stage's {_show(stage_points)}")
    return specs


def load_stage(stage_id: str) -> Stage:
    path = paths.ASSIGNMENTS / stage_id / "stage.toml"  # before the Stage exists to ask
    with open(path, "rb") as f:
        data = tomllib.load(f)
    points = _points(data["points"], f"{path}: the stage")
    return Stage(
        id=stage_id, title=data["title"], points=float(points), slides=str(data.get("slides", "")),
        library=data.get("library", "numpy"), time_limit_s=float(data.get("time_limit_s", 60)),
        call_timeout_s=float(data.get("call_timeout_s", 10 if data.get("library", "numpy") == "numpy" else 60)),
        memory_mb=int(data.get("memory_mb", 2048 if data.get("library", "numpy") == "numpy" else 6144)),
        bonus=bool(data.get("bonus", False)), forbidden=list(data.get("forbidden", [])),
        standins=list(data.get("standins", [])),
        hidden=_specs(data.get("hidden", {}), f"{path} [hidden]", points),
        public=_specs(data.get("public", {}), f"{path} [public]", points),
    )


@cache
def all_stages() -> tuple:
    """Every stage with a stage.toml, in course order."""
    return tuple(load_stage(p.parent.name) for p in sorted(paths.ASSIGNMENTS.glob("a[0-9][0-9]_*/stage.toml")))


def get(stage_id: str) -> Stage:
    for stage in all_stages():
        if stage.id == stage_id:
            return stage
    raise KeyError(stage_id)


class UnknownStage(KeyError):
    """A stage named by the user that is not one of the course's (a usage error, exit code 2)."""


def suite_stage_id(path) -> str:
    """The stage id a suite is named after: ``tests/hidden/test_a02_softmax.py`` -> ``a02_softmax``
    (the inverse of :meth:`Stage.suite`; also for a pytest node id's file part)."""
    return Path(str(path).partition("::")[0]).stem.removeprefix("test_")


def of_suite(path) -> Stage:
    """The stage whose suite (hidden or public) is at ``path`` (KeyError if none is)."""
    return get(suite_stage_id(path))


def resolve(names) -> list:
    """Stage ids from user input: full ids, ``a03`` or ``3``."""
    stages = all_stages()
    if not names:
        return list(stages)
    chosen = []
    for name in names:
        key = name.strip()
        match = [s for s in stages if s.id == key or s.id.split("_")[0] == key
                 or (key.isdigit() and s.id[1:3] == f"{int(key):02d}")]
        if not match:
            raise UnknownStage(tr("no stage {stage}; stages are: {stages}", stage=repr(key),
                                  stages=", ".join(s.id for s in stages)))
        chosen.extend(m for m in match if m not in chosen)
    return chosen


# What every stage's grade also depends on: the helpers and plugin that turn tests into scores and feedback.
SHARED_GRADING_FILES = [paths.PACKAGE / "engine" / "testing.py", paths.PACKAGE / "engine" / "plugin.py",
                        paths.PACKAGE / "engine" / "report.py", paths.TESTS / "grading.ini",
                        paths.PACKAGE / "engine" / "seeds.py", paths.HIDDEN_TESTS / "course_secret.txt"]


def suite_hash(stage_list) -> str:
    """A hash of everything that decides a grade for these stages, other than the submission.

    Changes when a stage's hidden tests, points, reference solution, probes,
    stand-ins or hidden data change, or the assertion helpers / plugin / report
    code that turn them into scores and feedback. Only files that exist are hashed.
    """
    digest = hashlib.sha256(b"grader-suite-v2\0")
    for stage in sorted(stage_list, key=lambda s: s.id):
        digest.update(f"stage {stage.id}\0".encode())
        for f in stage.grading_files():
            _hash_file(digest, f)
    for f in SHARED_GRADING_FILES:
        if f.exists():
            _hash_file(digest, f)
    return digest.hexdigest()


def _hash_file(digest, path: Path) -> None:
    rel = path.relative_to(paths.ROOT) if path.is_relative_to(paths.ROOT) else path
    digest.update(str(rel).encode() + b"\0")
    digest.update(path.read_bytes())
    digest.update(b"\0")
