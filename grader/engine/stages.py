"""The stages of the course, read from ``assignments/*/stage.toml``."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache

from . import paths

VISIBILITIES = ("visible", "hidden", "after_due_date")
# The first lines of every starter file (``make starter``); a notebook holds the file without them.
STARTER_HEADER = ("# Starter code, generated from the reference by `make starter`. Replace every\n"
                  "# `raise NotImplementedError(...)` with your implementation; keep the names and signatures.\n")


@dataclass(frozen=True)
class TestSpec:
    weight: float
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

    @property
    def folder(self):
        return paths.ASSIGNMENTS / self.id

    def tests(self, kind: str) -> dict:
        return self.hidden if kind == "hidden" else self.public

    def test_points(self, kind: str) -> dict:
        """max_score of each test function: the stage's points shared by weight."""
        specs = self.tests(kind)
        total = sum(s.weight for s in specs.values())
        return {name: self.points * s.weight / total for name, s in specs.items()} if total else {}


def _specs(table: dict, where: str) -> dict:
    specs = {}
    for name, spec in table.items():
        if isinstance(spec, (int, float)):
            spec = {"weight": spec}
        vis = spec.get("visibility", "visible")
        if vis not in VISIBILITIES:
            raise ValueError(f"{where}: {name} has visibility {vis!r}")
        specs[name] = TestSpec(float(spec["weight"]), vis)
    return specs


def load_stage(stage_id: str) -> Stage:
    path = paths.ASSIGNMENTS / stage_id / "stage.toml"
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return Stage(
        id=stage_id, title=data["title"], points=float(data["points"]), slides=str(data.get("slides", "")),
        library=data.get("library", "numpy"), time_limit_s=float(data.get("time_limit_s", 60)),
        call_timeout_s=float(data.get("call_timeout_s", 10 if data.get("library", "numpy") == "numpy" else 60)),
        memory_mb=int(data.get("memory_mb", 2048 if data.get("library", "numpy") == "numpy" else 6144)),
        bonus=bool(data.get("bonus", False)), forbidden=list(data.get("forbidden", [])),
        standins=list(data.get("standins", [])),
        hidden=_specs(data.get("hidden", {}), str(path)), public=_specs(data.get("public", {}), str(path)),
    )


@lru_cache(maxsize=None)
def all_stages() -> tuple:
    """Every stage with a stage.toml, in course order."""
    return tuple(load_stage(p.parent.name) for p in sorted(paths.ASSIGNMENTS.glob("a[0-9][0-9]_*/stage.toml")))


def get(stage_id: str) -> Stage:
    for stage in all_stages():
        if stage.id == stage_id:
            return stage
    raise KeyError(stage_id)


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
            raise KeyError(f"no stage {key!r}; stages are: {', '.join(s.id for s in stages)}")
        chosen.extend(m for m in match if m not in chosen)
    return chosen
