"""Printing a report as a table people can read in a terminal."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "yellow",
                "crashed": "magenta", "missing": "dim"}


def print_report(report: dict, *, show_feedback: bool = True, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"{report['submission']['id']} ({report.get('kind', 'hidden')} tests)")
    table.add_column("stage")
    table.add_column("status")
    table.add_column("score", justify="right")
    table.add_column("tests passed", justify="right")
    for s in report["stages"]:
        passed = sum(t["status"] == "passed" for t in s["tests"])
        label = s["id"] + (" (bonus)" if s.get("bonus") else "")
        table.add_row(label, s["status"], f"{s['score']:.2f} / {s['max_score']:.0f}", f"{passed}/{len(s['tests'])}")
    table.add_section()
    table.add_row("total", "", f"{report['score']:.2f} / {report['max_score']:.0f}", "")
    if "bonus_score" in report:
        table.add_row("bonus", "", f"{report['bonus_score']:.2f} / {report['bonus_max_score']:.0f}", "")
    console.print(table)
    if show_feedback:
        for s in report["stages"]:
            if s.get("message"):
                console.print(f"[bold]{s['id']}[/]: {s['message']}", highlight=False)
            for t in s["tests"]:
                if t["status"] != "passed" and s["status"] != "missing":
                    style = STATUS_STYLE.get(t["status"], "red")
                    console.print(f"  [{style}]{t['status']:>7}[/] {t['id']} — {t['name']}", highlight=False)
                    if t["feedback"]:
                        console.print(f"          {t['feedback']}", highlight=False, markup=False)
    for e in report.get("errors", []):
        console.print(f"[yellow]note:[/] {e}", highlight=False)
    iso = report["isolation"]
    if iso.get("mode") != "strict":
        console.print(f"[dim]isolation: {iso.get('note', iso.get('mode'))}[/]")
