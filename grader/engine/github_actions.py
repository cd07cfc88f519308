"""Public points on GitHub Actions: ``check --github`` in a step, ``python -m grader.engine.github_actions`` last.

In a workflow of the course's template repository each stage is one step,
``python -m grader check aNN_<name> starter --github``. With ``--github``, ``check`` also:

* appends the stage's section (its points, the tests that failed and why) to the step's summary
  (``$GITHUB_STEP_SUMMARY``: GitHub shows every step's summary on the run's page);
* prints a notice, ``a02_softmax: 6.75 / 8 public points``, which GitHub lists on the run's page;
* appends ``<stage>\\t<points>\\t<max>`` to ``$RUNNER_TEMP/public-points.tsv`` (a file of the job).

The last step, ``python -m grader.engine.github_actions STAGE...``, adds the file up into the run's
total and names the stages whose step wrote no line (a step that could not even start ``check``).
Nothing here depends on an action of GitHub's (GitHub Classroom's reporter action was retired with
Classroom itself), and the points are the ones ``check`` prints, quarters included.
"""
from __future__ import annotations

import os
import sys
from fractions import Fraction
from pathlib import Path

from ..i18n import from_environment, render, tr
from .feedback_groups import group_failures
from .report import Report, StageResult, TestStatus
from .table import STATUS_WORDS

POINTS_FILE = "public-points.tsv"


def _command_data(text: str) -> str:
    """Text inside a workflow command (``::notice::…``): GitHub's escapes, so it cannot end the command."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _command_property(text: str) -> str:
    return _command_data(text).replace(":", "%3A").replace(",", "%2C")


def _cell(text: str, limit: int = 300) -> str:
    """One line of Markdown table cell: no newline, no pipe, not too long."""
    text = " ".join((text or "").split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _points(x) -> str:
    return f"{float(x):g}"


def _stage_points(s: StageResult, language: str) -> str:
    return render(tr("{stage}: {points} / {max_points} public points", stage=s.id, points=_points(s.score),
                     max_points=_points(s.max_score)), language)


def summary(rep: Report) -> str:
    """A Markdown section per stage of a ``check`` report, in the report's language."""
    language = rep.language or "en"
    lines = []
    for s in rep.stages:
        lines.append(f"### {_stage_points(s, language)}")
        failing = [t for t in s.tests if t.status is not TestStatus.PASSED]
        if s.message:
            lines.append(f"\n{_cell(s.message)}")
        if failing:
            header = render(tr("| test | status | points | what is wrong |"), language)
            lines += ["", header, "|---|---|---|---|"]
            for group in group_failures(failing):  # a repeated feedback once, on the row of the tests it covers
                tests = group.tests
                statuses = dict.fromkeys(render(STATUS_WORDS[t.status.value], language) for t in tests)
                lines.append(f"| {'<br>'.join(f'`{_cell(t.id)}`' for t in tests)} | {', '.join(statuses)} | "
                             f"0 / {_points(sum(t.max_score for t in tests))} | {_cell(group.feedback)} |")
        else:
            lines.append("\n" + render(tr("Every public test of this stage passed."), language))
        lines.append("")
    return "\n".join(lines) + "\n"


def notices(rep: Report) -> list:
    language = rep.language or "en"
    return [f"::notice title={_command_property(s.id)}::" + _command_data(_stage_points(s, language))
            for s in rep.stages]


def publish(report: dict, environ=None, out=None) -> None:
    """What ``check --github`` adds to a run (above), from its report (JSON, as ``check`` grades it); outside
    GitHub Actions only the notices are printed."""
    rep = Report.from_json(report)
    environ = os.environ if environ is None else environ
    out = out or sys.stdout
    for line in notices(rep):
        print(line, file=out)
    if environ.get("GITHUB_STEP_SUMMARY"):
        with open(environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(summary(rep))
    if environ.get("RUNNER_TEMP"):
        with open(Path(environ["RUNNER_TEMP"]) / POINTS_FILE, "a", encoding="utf-8") as f:
            for s in rep.stages:
                f.write(f"{s.id}\t{s.score!r}\t{s.max_score!r}\n")


def total(expected=(), environ=None, out=None, language: str | None = None) -> tuple[Fraction, Fraction, list]:
    """Add up the job's points file: (points, max, the ``expected`` stages with no line); the total goes to
    the summary and a notice, a stage with no line to a warning (its points are not in the total). In
    ``language``, by default the student's (``LANG``, as ``check`` chooses)."""
    environ = os.environ if environ is None else environ
    language = language or from_environment(environ)
    out = out or sys.stdout
    path = Path(environ.get("RUNNER_TEMP", ".")) / POINTS_FILE
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    got = sum((Fraction(r[1]) for r in rows), Fraction(0))
    most = sum((Fraction(r[2]) for r in rows), Fraction(0))
    missing = [sid for sid in expected if sid not in {r[0] for r in rows}]
    text = render(tr("Public points: {points} / {max_points}", points=_points(got), max_points=_points(most)),
                  language)
    print(f"::notice title={_command_property(render(tr('Public points'), language))}::{_command_data(text)}",
          file=out)
    if missing:
        stages_missing = ", ".join(missing)
        print(f"::warning title={_command_property(render(tr('Not checked'), language))}::"
              + _command_data(render(tr("no points from {stages}", stages=stages_missing), language)), file=out)
    if environ.get("GITHUB_STEP_SUMMARY"):
        with open(environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(f"## {text}\n\n"
                    + (render(tr("Not checked: {stages}.", stages=", ".join(missing)), language) + "\n\n"
                       if missing else "")
                    + render(tr("These are the public tests only; the grade comes from the hidden suites."),
                             language) + "\n")
    return got, most, missing


if __name__ == "__main__":
    total(sys.argv[1:])
