"""The batch's last words on the console: a table of the class per stage, what went wrong, the counts.

Said in the batch's language (``--lang`` or course.toml's ``language``), as every line of the batch is
(``line``: a coloured word, then the rest)."""
from __future__ import annotations

import statistics

from grader.engine.report import StageStatus
from grader.engine.table import pad
from grader.i18n import render, tr

from .rows import STATUS_WORDS, Row, Status

COLUMNS = (tr("max"), tr("mean"), tr("median"), tr("min"), tr("max seen"), tr("full marks"), tr("missing"))


def line(colour: str, word, rest, language: str, sep: str = " ", width: int = 0) -> str:
    """A console line (rich markup): the marked text ``word`` in ``colour`` (right-aligned in ``width`` columns),
    ``sep``, then ``rest`` (marked text or plain), rendered in ``language`` ("both": the Korean line, then the
    English one where they differ) and escaped (a student's id or an error is never read as markup)."""
    from rich.markup import escape  # start-up: rich is imported only by a batch that prints
    if language == "both":
        ko, en = (line(colour, word, rest, each, sep, width) for each in ("ko", "en"))
        return ko if ko == en else f"{ko}\n{en}"
    return f"[{colour}]{escape(pad(render(word, language), width, right=True))}[/]{sep}{escape(render(rest, language))}"


def _stage_row(label: str, maximum: float, values: list, missing: int) -> list:
    if not values:
        return [label, f"{maximum:g}", "-", "-", "-", "-", "-", str(missing)]
    return [label, f"{maximum:g}", f"{statistics.fmean(values):.2f}", f"{statistics.median(values):.2f}",
            f"{min(values):.2f}", f"{max(values):.2f}", f"{sum(abs(v - maximum) < 1e-9 for v in values)}",
            str(missing)]


def _table(rows: list[Row], chosen, language: str):
    """Per stage (and the total) over the graded rows: mean, median, extremes, full marks, missing."""
    from rich.table import Table  # start-up: rich is imported only by a batch that prints
    graded = [r.graded for r in rows if r.has_grade]
    table = Table(title=render(tr("class summary: {graded} graded of {count} submissions", graded=len(graded),
                                  count=len(rows)), language))
    table.add_column(render(tr("stage"), language), no_wrap=True)
    for col in COLUMNS:
        table.add_column(render(col, language), justify="right")
    bonus = render(tr(" (bonus)"), language)
    for s in chosen:
        entries = [st for rep in graded for st in rep.stages if st.id == s.id]
        table.add_row(*_stage_row(s.id + (bonus if s.bonus else ""), s.points, [e.score for e in entries],
                                  sum(e.status is StageStatus.MISSING for e in entries)))
    table.add_section()
    table.add_row(*_stage_row(render(tr("total"), language), sum(s.points for s in chosen if not s.bonus),
                              [rep.score for rep in graded], 0))
    return table


def print_summary(console, rows: list[Row], chosen, counts, language: str = "en") -> None:
    """The class table, a line per submission that failed, the outdated grades, then ``counts.line()``, in
    ``language``."""
    console.print(_table(rows, chosen, language))
    for r in rows:
        if r.status not in (Status.GRADED, Status.OUTDATED, Status.PENDING):
            console.print(line("red", STATUS_WORDS[r.status.value], f"{r.job.id}: {r.error}", language, width=10),
                          highlight=False, markup=True)
    outdated = [r.job.id for r in rows if r.status is Status.OUTDATED]
    if outdated:
        more = ", …" if len(outdated) > 5 else ""
        console.print(line("yellow", STATUS_WORDS[Status.OUTDATED.value], tr(
            "{count} grade(s) were made with an earlier version of the tests ({students}); run the batch again to "
            "grade them with the current tests", count=len(outdated), students=", ".join(outdated[:5]) + more),
            language, sep=": "), highlight=False)
    console.print(render(counts.line(), language), highlight=False)
