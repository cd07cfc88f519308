"""Which earlier modules a later stage is graded with: the student's own, or the course's stand-ins.

A stage that imports earlier stages (``standins = [...]`` in its stage.toml) imports each of them
**as the student wrote it** when that earlier stage scored full marks in the same grading session.
Otherwise (it lost points, it is not in the submission, it cannot be imported, or no verdict is
known) the worker gives the later stage the course's stand-in instead: the student's module with
its contract names replaced by ``grader/sandbox/standins/`` and its course-provided code (what the
starter gives complete, such as ``load_pretrained_bert``) replaced by the starter's
(``grader/sandbox/runtime.py``). A correct student never meets a stand-in; a wrong one is
charged once, in the earlier stage.

The verdict always comes from a grading of the earlier stage's own suite in the same session: an
earlier stage that is part of the grading is graded first (the plugin runs stages in course
order), and one that is not (``grade --stages a08_sentiment``) is added to the session as a
*verdict-only* suite (:func:`verdict_only`), whose tests run to decide but are not scored in the
report. A process that grades many submissions (the catalogue, a test session) grades the same
earlier file with the same suites and inputs once: :class:`Recorded` keeps those verdicts, keyed by
everything the grading depends on, and a later grading takes the verdict instead of running the
suite again (``verdict_from: "recorded"``). Each stage's report entry lists the decisions
(``earlier``, report schema v1).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from enum import Enum

from grader.sandbox import protocol
from grader.sandbox.protocol import ReplyKind

from ..i18n import message, tr
from . import stages


class Verdict(str, Enum):
    FULL_MARKS = "full_marks"
    LOST_POINTS = "lost_points"
    MISSING = "missing"
    NOT_IMPORTABLE = "not_importable"
    UNKNOWN = "unknown"


class Source(str, Enum):
    """Where the verdict came from."""
    THIS_REPORT = "this_report"     # the earlier stage is graded in the same report
    VERDICT_ONLY = "verdict_only"   # its suite ran in this grading only to decide (not scored here)
    RECORDED = "recorded"           # its suite ran on the same files with the same inputs earlier in this process
    NONE = "none"                   # nothing was graded (module missing, or not in the session)


@dataclass(frozen=True)
class EarlierModule:
    """One earlier stage as a later stage uses it, and why."""
    later: str
    stage: str
    verdict: Verdict
    source: Source
    detail: str = ""  # what the verdict rests on, e.g. "24 of 24 tests passed"

    @property
    def own(self) -> bool:
        return self.verdict is Verdict.FULL_MARKS

    def why(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        where = {Source.THIS_REPORT: tr(" in this grading"),
                 Source.VERDICT_ONLY: (tr(" when its tests ran in this grading only to decide this (they are not "
                                          "scored in this report)")),
                 Source.RECORDED: (tr(" when its tests ran on the same files with the same inputs for an earlier "
                                      "grading (they are not scored in this report)")),
                 Source.NONE: ""}[self.source]
        if self.own:
            # i18n: {stage} is an earlier stage's module (e.g. a02_softmax); {later_stage} the stage being graded, which
            # imports it.
            return (tr("{stage}.py scored full marks{detail}{where}, so {later_stage} imports it as you "
                       "wrote it", stage=self.stage, detail=detail, where=where, later_stage=self.later))
        cause = {
            Verdict.LOST_POINTS: tr("{stage}.py lost points{detail}{where}",
                                    stage=self.stage, detail=detail, where=where),
            Verdict.MISSING: tr("{stage}.py is not in the submission", stage=self.stage),
            Verdict.NOT_IMPORTABLE: tr("{stage}.py could not be imported{detail}",
                                       stage=self.stage, detail=detail),
            Verdict.UNKNOWN: tr("{stage} was not graded in this session, so its verdict is unknown",
                                stage=self.stage),
        }[self.verdict]
        # i18n: {cause} says how the earlier stage {stage} did (its own message); {later_stage} is the stage being
        # graded.
        return (tr("{cause}, so {later_stage} is graded with the course's stand-in for it (its contract names and "
                   "course-provided code; your own helpers stay yours): a mistake there costs points only in "
                   "{stage}", cause=cause, later_stage=self.later, stage=self.stage))

    def to_json(self) -> dict:
        """The report's ``stages[].earlier[]`` entry (schema v1)."""
        return {"stage": self.stage, "used": "own" if self.own else "stand-in", "verdict": self.verdict.value,
                "verdict_from": self.source.value, "why": message.to_json(self.why())}

    def to_worker(self) -> dict:
        """What the worker needs (grader/sandbox/runtime.py): which module, the student's own or not."""
        return {"stage": self.stage, "own": self.own}


def decide(later: str, stage: str, *, present: bool, statuses: list | None, expected: int,
           load: dict | None, verdict_only: bool, recorded: tuple | None = None) -> EarlierModule:
    """The decision for ``stage`` as ``later`` imports it.

    ``present``: the module is in the submission; ``statuses``: the report statuses of its tests that
    ran in this session (None: its suite was not run); ``expected``: how many of its tests were
    collected; ``load``: its worker's reply to importing it; ``verdict_only``: its suite ran only to
    decide this; ``recorded``: (verdict, detail) of an earlier grading of the same files with the same
    suites and inputs, when its suite did not run here."""
    source = Source.VERDICT_ONLY if verdict_only else Source.THIS_REPORT
    if not present:
        return EarlierModule(later, stage, Verdict.MISSING, Source.NONE)
    if statuses is None and recorded is not None:
        return EarlierModule(later, stage, Verdict(recorded[0]), Source.RECORDED, recorded[1])
    if statuses is None or expected == 0 or len(statuses) < expected:
        return EarlierModule(later, stage, Verdict.UNKNOWN, Source.NONE)
    if load and protocol.reply_kind(load) is ReplyKind.LOAD_ERROR:
        text = f"{load.get('type')}: {load.get('message')}"
        return EarlierModule(later, stage, Verdict.NOT_IMPORTABLE, source, " ".join(text.split())[:300])
    passed = sum(s == "passed" for s in statuses)
    verdict = Verdict.FULL_MARKS if passed == len(statuses) else Verdict.LOST_POINTS
    return EarlierModule(later, stage, verdict, source, tr("{passed} of {total} tests passed",
                                                           passed=passed, total=len(statuses)))


def verdict_only(chosen: list, present: set) -> list:
    """The earlier stages whose verdict the ``chosen`` stages need but that are not among them, in
    course order: those handed in (a missing module needs no grading to be stood in). Their
    suites run first in the same session, unscored."""
    chosen_ids = {s.id for s in chosen}
    needed = set()
    todo = [s for s in chosen if s.id in present]
    while todo:
        for name in todo.pop().standins:
            if name not in chosen_ids and name not in needed and name in present:
                needed.add(name)
                todo.append(stages.get(name))
    return [s for s in stages.all_stages() if s.id in needed]


class Recorded:
    """Verdicts of verdict-only suites already run in this process, by what they depend on: the stage, the
    submission's files of it and of the earlier stages it imports, its suites (``stages.suite_hash``), the
    kind of suite, whether only the fast tests ran, and the seed of the inputs. The same key runs the same
    tests on the same code with the same inputs, so its verdict is the one the suite would give again."""

    def __init__(self):
        self._verdicts: dict = {}

    @staticmethod
    def key(stage, folder: str, kind: str, fast_only: bool, seed) -> str:
        digest = hashlib.sha256(f"{stage.id}\0{kind}\0{fast_only}\0{seed}\0{stages.suite_hash([stage])}\0".encode())
        for name in [stage.id, *stage.standins]:
            path = os.path.join(folder, f"{name}.py")
            digest.update(name.encode() + b"\0")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    digest.update(f.read())
            digest.update(b"\0")
        return digest.hexdigest()

    def get(self, key: str):
        """(verdict, detail) or None."""
        return self._verdicts.get(key)

    def put(self, key: str, verdict: dict | None) -> None:
        """Keep a verdict the session reported (``{"verdict", "detail"}``); an unknown one is not kept."""
        if verdict and verdict.get("verdict") not in (None, Verdict.UNKNOWN.value):
            self._verdicts[key] = (verdict["verdict"], verdict.get("detail", ""))
