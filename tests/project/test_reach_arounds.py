"""Reaching around the grader's rules gains nothing (issue 33; docs/TRUST.md).

Each case of tests/reach_arounds/cases.toml is graded twice, with ``python -m grader grade``'s own function: its
baseline (the same module without the attack: an honest mistake, or a forbidden call the worker catches) and
the attack on top of it. The attack must score at most what the baseline scores, and where the trusted side's
reading of the source is what stops it, the feedback must say what was found and on which line.
"""
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest
from conftest import ROOT

from grader.engine import run
from grader.engine.options import GradingOptions

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

CASES = tomllib.loads((ROOT / "tests" / "reach_arounds" / "cases.toml").read_text())["case"]
LAYERS = {"source", "audit", "dispatcher", "clock", "control"}

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the worker's confinement is Linux's")


def _apply(source: str, edits: list) -> str:
    for edit in edits:
        assert source.count(edit["find"]) == 1, f"not exactly once: {edit['find'][:80]!r}"
        source = source.replace(edit["find"], edit["replace"])
    return source


def _submission(dest: Path, stage: str, edits: list) -> Path:
    dest.mkdir(parents=True)
    for path in (ROOT / "solutions").glob("a0*.py"):
        shutil.copy(path, dest)
    (dest / f"{stage}.py").write_text(_apply((ROOT / "solutions" / f"{stage}.py").read_text(), edits))
    return dest


@cache
def _graded(stage: str, edits: tuple) -> dict:
    """The stage's report for the reference with ``edits`` (((find, replace), ...)); a baseline several
    cases share is graded once per process."""
    folder = Path(tempfile.mkdtemp(prefix="reach-around-")) / "sub"
    try:
        sub = _submission(folder, stage, [{"find": f, "replace": r} for f, r in edits])
        return run.grade(str(sub), GradingOptions(stage_ids=[stage]))["stages"][0]
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)


def _grade(stage: str, edits: list) -> dict:
    return _graded(stage, tuple((e["find"], e["replace"]) for e in edits))


def test_the_list_covers_at_least_ten_techniques_each_with_what_stops_it():
    assert len({c["id"] for c in CASES}) == len(CASES) >= 10
    for case in CASES:
        assert case["layers"] and set(case["layers"]) <= LAYERS, case["id"]
    assert {layer for c in CASES for layer in c["layers"]} == LAYERS


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_an_attack_gains_nothing_and_the_feedback_says_what_was_found(case):
    stage = case["stage"]
    baseline, attacked = _grade(stage, case["baseline"]), _grade(stage, case["baseline"] + case["attack"])
    assert attacked["score"] <= baseline["score"], (
        f"{case['id']} gained {attacked['score'] - baseline['score']} points: {case['technique']}")
    assert baseline["score"] < baseline["max_score"], f"{case['id']}: the baseline itself is not caught"
    feedback = " ".join(str(t["feedback"]) for t in attacked["tests"] if t["status"] != "passed")
    if "source" in case["layers"]:
        assert f"{stage}.py:" in feedback and ("reaches around the grader's rules" in feedback
                                               or "which this stage forbids" in feedback), feedback[:600]
