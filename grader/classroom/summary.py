"""The batch's last words on the console: a table of the class per stage, what went wrong, the counts."""
from __future__ import annotations

import statistics

from grader.engine.report import StageStatus

from .rows import Row, Status

COLUMNS = ("max", "mean", "median", "min", "max seen", "full marks", "missing")


def _stage_row(label: str, maximum: float, values: list, missing: int) -> list:
    if not values:
        return [label, f"{maximum:g}", "-", "-", "-", "-", "-", str(missing)]
    return [label, f"{maximum:g}", f"{statistics.fmean(values):.2f}", f"{statistics.median(values):.2f}",
            f"{min(values):.2f}", f"{max(values):.2f}", f"{sum(abs(v - maximum) < 1e-9 for v in values)}",
            str(missing)]


def _table(rows: list[Row], chosen):
    """Per stage (and the total) over the graded rows: mean, median, extremes, full marks, missing."""
    from rich.table import Table  # start-up: rich is imported only by a batch that prints
    graded = [r.graded for r in rows if r.has_grade]
    table = Table(title=f"class summary: {len(graded)} graded of {len(rows)} submissions")
    table.add_column("stage", no_wrap=True)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for s in chosen:
        entries = [st for rep in graded for st in rep.stages if st.id == s.id]
        table.add_row(*_stage_row(s.id + (" (bonus)" if s.bonus else ""), s.points, [e.score for e in entries],
                                  sum(e.status is StageStatus.MISSING for e in entries)))
    table.add_section()
    table.add_row(*_stage_row("total", sum(s.points for s in chosen if not s.bonus),
                              [rep.score for rep in graded], 0))
    return table


def print_summary(console, rows: list[Row], chosen, counts) -> None:
    """The class table, a line per submission that failed, the outdated grades, then ``counts.line()``."""
    console.print(_table(rows, chosen))
    for r in rows:
        if r.status not in (Status.GRADED, Status.OUTDATED, Status.PENDING):
            console.print(f"[red]{r.status:>10}[/] {r.job.id}: {r.error}", highlight=False, markup=True)
    outdated = [r.job.id for r in rows if r.status is Status.OUTDATED]
    if outdated:
        more = ", …" if len(outdated) > 5 else ""
        console.print(f"[yellow]outdated[/]: {len(outdated)} grade(s) were made with an earlier version of the "
                      f"tests ({', '.join(outdated[:5])}{more}); run the batch again to grade them with the "
                      "current tests", highlight=False)
    console.print(counts.line(), highlight=False)
