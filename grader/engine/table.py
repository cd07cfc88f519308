"""Printing a report as a table people can read in a terminal.

Plain text with ANSI colours when the output is a terminal (and ``NO_COLOR``
is not set). Not rich: ``check`` prints this table, and importing rich cost
about as much as importing numpy (``benchmarks/README.md``).
"""
from __future__ import annotations

import os
import sys

from ..i18n import render, tr
from .feedback_groups import group_failures
from .report import Report, StageStatus, TestStatus

ANSI = {"green": "32", "red": "31", "yellow": "33", "magenta": "35", "dim": "2", "bold": "1"}
STATUS_COLOUR = {"passed": "green", "failed": "red", "error": "red", "timeout": "yellow",
                 "crashed": "magenta", "missing": "dim"}
# The words a student reads for the report's statuses (the report itself keeps the English values).
STATUS_WORDS = {"passed": tr("passed"), "failed": tr("failed"), "error": tr("error"), "timeout": tr("timeout"),
                "crashed": tr("crashed"), "missing": tr("missing"), "graded": tr("graded"), "skipped": tr("skipped")}
# What `check` tells a student about confinement, when it was less than strict (the layers stay in the report).
LESS_CONFINED = tr("note: this computer does not allow all of the grader's protections, so your code ran less "
                   "confined than when your instructor grades it; your points are the same.")


def width(text: str) -> int:
    """Columns ``text`` takes in a terminal: Hangul (and other wide characters) take two."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, columns: int, right: bool = False) -> str:
    space = " " * max(0, columns - width(text))
    return space + text if right else text + space


def _grid(header: list, rows: list, footer: list, right: set) -> list:
    """Box-drawn lines of a table; ``right``: indices of right-aligned columns."""
    widths = [max(width(r[i]) for r in [header, *rows, *footer]) for i in range(len(header))]

    def line(cells):
        return "│ " + " │ ".join(pad(c, w, i in right) for i, (c, w) in enumerate(zip(cells, widths))) + " │"

    def rule(left, mid, end):
        return left + mid.join("─" * (w + 2) for w in widths) + end

    out = [rule("┌", "┬", "┐"), line(header), rule("├", "┼", "┤"), *map(line, rows)]
    if footer:
        out += [rule("├", "┼", "┤"), *map(line, footer)]
    return out + [rule("└", "┴", "┘")]


def print_report(report: dict, *, show_feedback: bool = True, file=None) -> None:
    """The report (JSON, as a grading returns it) as a table and its feedback, in the report's language (its
    text is already in it; the table's own words are translated here)."""
    rep = Report.from_json(report)
    file = file or sys.stdout
    colour = file.isatty() and "NO_COLOR" not in os.environ
    language = rep.language or "en"

    def words(text):
        return render(text, "ko" if language == "both" else language)  # one line per cell, even for "both"

    def status_of(status: TestStatus | StageStatus):
        return words(STATUS_WORDS[status.value])

    def paint(text, name):
        return f"\033[{ANSI[name]}m{text}\033[0m" if colour and name else text

    def say(text=""):
        print(text, file=file)

    rows = []
    for s in rep.stages:
        passed = sum(t.status is TestStatus.PASSED for t in s.tests)
        rows.append([s.id + (words(tr(" (bonus)")) if s.bonus else ""), status_of(s.status),
                     f"{s.score:.2f} / {s.max_score:.0f}", f"{passed}/{len(s.tests)}"])
    footer = [[words(tr("total")), "", f"{rep.score:.2f} / {rep.max_score:.0f}", ""]]
    if rep.bonus:
        footer.append([words(tr("bonus")), "", f"{rep.bonus_score:.2f} / {rep.bonus_max_score:.0f}", ""])
    kind = tr("hidden tests") if rep.kind == "hidden" else tr("public tests")
    say(paint(f"{rep.submission['id']} ({words(kind)})", "bold"))
    header = [words(h) for h in (tr("stage"), tr("status"), tr("score"), tr("tests passed"))]
    for text in _grid(header, rows, footer, right={2, 3}):
        say(text)
    if show_feedback:
        for s in rep.stages:
            if s.message:
                say(f"{paint(s.id, 'bold')}: {s.message}")
            if s.status is StageStatus.MISSING:
                continue
            for group in group_failures([t for t in s.tests if t.status is not TestStatus.PASSED]):
                for t in group.tests:
                    status = paint(pad(status_of(t.status), 7, right=True), STATUS_COLOUR[t.status.value])
                    say(f"  {status} {t.id} — {t.name.replace(chr(10), ' / ')}")
                if group.feedback:
                    say("          " + group.feedback.replace("\n", "\n          "))
                if len(group.tests) > 1:
                    same = render(tr("(the same feedback for these {count} tests; shown for the first)",
                                     count=len(group.tests)), language)
                    say(paint("          " + same.replace("\n", "\n          "), "dim"))
    for e in rep.errors:
        say(f"{paint(words(tr('note:')), 'yellow')} {e}")
    iso = rep.isolation
    if iso.get("mode") == "strict":
        return
    if rep.kind == "public":  # a student: one plain line, in their language
        say(paint(render(LESS_CONFINED, language), "dim"))
    else:
        say(paint(f"isolation: {iso.get('note', iso.get('mode'))}", "dim"))
