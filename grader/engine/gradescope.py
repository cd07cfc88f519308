"""Gradescope's results.json from a report (``grade --format gradescope``), and the result of a
submission that was not graded (``python -m grader.engine.gradescope not-graded OUT STATUS``, which
the autograder's ``run_autograder`` calls when ``grade`` wrote nothing).

The autograder zip itself is built by ``grader.authoring.autograder``.
"""
from __future__ import annotations

import json
import sys

from ..i18n import render, tr
from .report import Report, StageResult, TestResult, TestStatus
from .table import STATUS_WORDS

# What the student sees in results.json; the reason itself is in the autograder's output (its stdout),
# which only the course staff see. Keyed by ``grade``'s exit status (grader/cli.py).
NOT_GRADED = {
    "2": tr("Not graded: no stage module (aNN_<name>.py or a notebook) was found in your submission."),
    "1": tr("Not graded: the autograder could not run on this submission. This is not your code's fault; "
            "your instructor can see why in the autograder's output."),
}


def results_json(report: dict) -> dict:
    """Gradescope's results format (score, tests with name/score/max_score/status/output/visibility) of a report
    (JSON, as a grading returns it), in the report's language (its test names and feedback already are; the lines
    added here are translated)."""
    rep = Report.from_json(report)
    language = rep.language or "en"
    bonus = (tr(" (+{bonus} bonus, capped at the course total)", bonus=f"{rep.bonus_score:.2f}") if rep.bonus
             else "")
    return {
        "score": min(rep.score + rep.bonus_score, rep.max_score),
        "output": render(tr("Transformer course grader: {score} / {max_score}{bonus}", score=f"{rep.score:.2f}",
                            max_score=f"{rep.max_score:.0f}", bonus=bonus), language),
        "tests": [_test(stage, t, language) for stage in rep.stages for t in stage.tests],
        "visibility": "visible",
        "execution_time": int(rep.duration_s),
    }


def _test(stage: StageResult, t: TestResult, language: str) -> dict:
    """One test as Gradescope lists it: passed or failed, and its feedback (else its status, when it did not pass)."""
    passed = t.status is TestStatus.PASSED
    return {
        "name": f"{stage.id}: {t.name}",
        "number": t.id,
        "score": t.score,
        "max_score": t.max_score,
        "status": "passed" if passed else "failed",
        "output": t.feedback or ("" if passed else render(STATUS_WORDS[t.status.value], language)),
        "visibility": t.visibility,
    }


def not_graded(status: str, language: str = "en") -> dict:
    """results.json for a submission ``grade`` could not grade (its exit ``status``): a score of 0
    that says why (in ``language``), so that Gradescope still shows a result."""
    return {"score": 0.0, "output": render(NOT_GRADED.get(status, NOT_GRADED["1"]), language), "tests": []}


def main(argv=None) -> None:
    """``not-graded OUT STATUS [LANGUAGE]``: write :func:`not_graded`'s results.json to OUT."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (3, 4) or argv[0] != "not-graded":
        sys.exit("usage: python -m grader.engine.gradescope not-graded OUT STATUS [LANGUAGE]")
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(not_graded(argv[2], *argv[3:]), f, ensure_ascii=False)


if __name__ == "__main__":
    main()
