"""Printing a report as a table people can read in a terminal.

Plain text with ANSI colours when the output is a terminal (and ``NO_COLOR``
is not set). Not rich: ``check`` prints this table, and importing rich cost
about as much as importing numpy (``benchmarks/README.md``).
"""
from __future__ import annotations

import os
import sys

ANSI = {"green": "32", "red": "31", "yellow": "33", "magenta": "35", "dim": "2", "bold": "1"}
STATUS_COLOUR = {"passed": "green", "failed": "red", "error": "red", "timeout": "yellow",
                 "crashed": "magenta", "missing": "dim"}


def _grid(header: list, rows: list, footer: list, right: set) -> list:
    """Box-drawn lines of a table; ``right``: indices of right-aligned columns."""
    widths = [max(len(r[i]) for r in [header, *rows, *footer]) for i in range(len(header))]

    def line(cells):
        return "│ " + " │ ".join(c.rjust(w) if i in right else c.ljust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))) + " │"

    def rule(left, mid, end):
        return left + mid.join("─" * (w + 2) for w in widths) + end

    out = [rule("┌", "┬", "┐"), line(header), rule("├", "┼", "┤"), *map(line, rows)]
    if footer:
        out += [rule("├", "┼", "┤"), *map(line, footer)]
    return out + [rule("└", "┴", "┘")]


def print_report(report: dict, *, show_feedback: bool = True, file=None) -> None:
    file = file or sys.stdout
    colour = file.isatty() and "NO_COLOR" not in os.environ

    def paint(text, name):
        return f"\033[{ANSI[name]}m{text}\033[0m" if colour and name else text

    def say(text=""):
        print(text, file=file)

    rows = []
    for s in report["stages"]:
        passed = sum(t["status"] == "passed" for t in s["tests"])
        rows.append([s["id"] + (" (bonus)" if s.get("bonus") else ""), s["status"],
                     f"{s['score']:.2f} / {s['max_score']:.0f}", f"{passed}/{len(s['tests'])}"])
    footer = [["total", "", f"{report['score']:.2f} / {report['max_score']:.0f}", ""]]
    if "bonus_score" in report:
        footer.append(["bonus", "", f"{report['bonus_score']:.2f} / {report['bonus_max_score']:.0f}", ""])
    say(paint(f"{report['submission']['id']} ({report.get('kind', 'hidden')} tests)", "bold"))
    for text in _grid(["stage", "status", "score", "tests passed"], rows, footer, right={2, 3}):
        say(text)
    if show_feedback:
        for s in report["stages"]:
            if s.get("message"):
                say(f"{paint(s['id'], 'bold')}: {s['message']}")
            for t in s["tests"]:
                if t["status"] != "passed" and s["status"] != "missing":
                    status = paint(t['status'].rjust(7), STATUS_COLOUR.get(t['status'], 'red'))
                    say(f"  {status} {t['id']} — {t['name']}")
                    if t["feedback"]:
                        say(f"          {t['feedback']}")
    for e in report.get("errors", []):
        say(f"{paint('note:', 'yellow')} {e}")
    iso = report["isolation"]
    if iso.get("mode") != "strict":
        say(paint(f"isolation: {iso.get('note', iso.get('mode'))}", "dim"))
