"""How a grading runs: one typed object that ``run.grade`` takes and every caller passes along.

``check`` and ``grade`` (``grader/cli.py``) build one from their options; a batch builds one for the whole class
and each grading process of it grades with it (``grader/classroom``: the executors, ``grading_process``); the
catalogue and the mutation score build theirs (``grader/authoring``). What varies per submission is not in it:
the submission itself and its id (``run.grade``'s own arguments). It crosses a process boundary only in a batch's
grading-process spec, as JSON (:meth:`GradingOptions.to_json`, :meth:`GradingOptions.from_json`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

KINDS = ("hidden", "public")
ISOLATIONS = ("auto", "strict", "degraded")


@dataclass(frozen=True)
class GradingOptions:
    """Everything but the submission that decides how it is graded (the defaults: the hidden suites of every
    stage, the strongest isolation the machine allows, a report in English, checked against the schema)."""

    kind: str = "hidden"
    """The suites: "hidden" (``grade``, a batch) or "public" (``check``)."""
    stage_ids: tuple[str, ...] | None = None
    """The stages to grade (None: every stage), graded in course order."""
    isolation: str = "auto"
    """How the workers are confined (``isolation.Isolation.choose``): "auto" the strongest the machine allows,
    "strict" every guarantee or ``isolation.IsolationUnavailable``, "degraded" none."""
    allow_readable_secrets: bool = False
    """Grade on the hidden suites even where nothing can hide the secrets from a worker (the report says so)."""
    hide: tuple[str, ...] = ()
    """More paths no worker may read (a batch's class folder and its outputs)."""
    threads: int = 1
    """Torch threads in each worker (``grade``: the cores; a batch: its share per grading)."""
    seed: int | None = None
    """The submission's seed, which the hidden suites draw their random inputs from (``grader/engine/seeds.py``).
    None: derived from the course secret and the submission's id, so a regrade of the same id draws the same
    inputs. The report records it, and that value given here reproduces the report."""
    fast_only: bool = False
    """Leave out the tests marked ``slow`` (end-to-end training): the mutant catalogue, since a mistake caught by
    a subset of the tests is caught by all of them. Students are always graded on every test."""
    reverse_order: bool = False
    """Run each stage's tests in reverse order (the determinism checks)."""
    language: str | None = "en"
    """What the report's student-facing texts are in ("en", "ko", "both"; the report records it). None leaves each
    text a ``grader.i18n.Message``, to be rendered later in any language (``grader.i18n.localize``); grading
    itself does not depend on it."""
    pytest_here: bool = False
    """Run the pytest session in this process instead of a new one: for a process that grades one submission
    and exits (``check``, a batch's grading process); the student's code still runs in confined workers."""
    validate: bool = True
    """Check the report against the schema (``check`` only prints it, and skips that)."""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of suites {self.kind!r}: one of {', '.join(KINDS)}")
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"unknown isolation {self.isolation!r}: one of {', '.join(ISOLATIONS)}")
        # a list given for a tuple (the command line, JSON) is kept as a tuple: the options stay immutable
        if self.stage_ids is not None:
            object.__setattr__(self, "stage_ids", tuple(self.stage_ids))
        object.__setattr__(self, "hide", tuple(str(h) for h in self.hide))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> GradingOptions:
        """The options :meth:`to_json` gave; a key that is not an option is a ``ValueError``."""
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"not grading options: {', '.join(sorted(unknown))}")
        return cls(**data)
