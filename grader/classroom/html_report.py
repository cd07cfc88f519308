"""HTML pages people look at: a feedback page per submission and a class report.

Every page is one self-contained file: inline CSS, inline SVG plots, one small
inline script (sortable tables); no external asset, no CDN, nothing fetched.
They open from a file system, an LMS upload or an e-mail.

This module computes what the pages show; the Jinja2 templates in
``templates/`` lay it out (``base.html`` with ``style.css`` and ``sortable.js``,
``student.html``, ``class.html``, ``macros.html``, the plots ``histogram.svg``
and ``hbars.svg``). Autoescaping is on: every value a template prints is
HTML-escaped, so a student's id or feedback cannot inject markup. The only
markup passed into a template is the plots, rendered by the same autoescaped
environment.

Visibility (``stage.toml``) on the per-submission page, which is meant for the student:

* ``visible``: the test's name, status, points and, when it did not pass, its feedback;
* ``hidden``: name, status and points only; the feedback is withheld ("hidden test");
* ``after_due_date``: like ``hidden`` until the due date; pass ``reveal_after_due=True``
  (``write_all(..., reveal_after_due=True)``) to publish their feedback afterwards.

The class report (``class.html``) is for instructors and shows every test's
feedback, hidden ones included: do not publish it. It is in the batch's language
(``--lang`` or course.toml's ``language``), as are the frame of the students' pages.
"""
from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

import jinja2
from markupsafe import Markup

from grader import i18n
from grader.engine.atomic import write_bytes
from grader.engine.feedback_groups import diagnosis_key, group_failures
from grader.engine.report import StageResult, StageStatus, TestResult, TestStatus
from grader.engine.table import STATUS_WORDS

from .rows import STATUS_WORDS as ROW_WORDS
from .rows import Row, Status, unfinished

STATUS_COLOUR = {"graded": "#0969da", "outdated": "#9a6700", "pending": "#6e7781", "unreadable": "#cf222e",
                 "passed": "#1a7f37", "failed": "#cf222e", "error": "#cf222e", "timeout": "#9a6700",
                 "crashed": "#8250df", "missing": "#6e7781"}


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x is not None else ""


def _fraction(x) -> float:
    """``x`` clamped to [0, 1]; None and NaN count as 0."""
    return 0.0 if x is None or math.isnan(x) else max(0.0, min(1.0, x))


_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_env.filters.update(fmt=_fmt, px=lambda x: f"{x:.1f}", pct=lambda x: f"{x:.0%}")
_env.globals["status_colour"] = STATUS_COLOUR


@jinja2.pass_context
def _translate(context, msgid: str, **params) -> str:
    """``_("...")`` in a template: the text in the page's language (``lang`` of the context, else English)."""
    return i18n.render(i18n.tr(msgid, **params), context.get("lang", "en"))


WORDS = {**STATUS_WORDS, **ROW_WORDS}  # a test's, a stage's or a row's status, as the pages say it


@jinja2.pass_context
def _status_word(context, status: str) -> str:
    return i18n.render(WORDS.get(status, status), context.get("lang", "en"))


_env.globals.update({"_": _translate, "status_word": _status_word})


def render(template: str, **context) -> str:
    """A template with ``context``; ``lang`` (default English) is the language of its text and its ``<html lang>``
    ("both" pages are Korean first)."""
    lang = context.setdefault("lang", "en")
    return _env.get_template(template).render(html_lang="en" if lang == "en" else "ko", **context)


# ---------------------------------------------------------------- plots (inline SVG)

def svg_histogram(values, lo: float, hi: float, *, bins: int = 10, title: str = "", xlabel: str = "score",
                  width: int = 330, height: int = 190, colour: str = "#0969da", cls: str = "plot") -> str:
    """A histogram of ``values`` over [lo, hi] as inline SVG (the last bin includes ``hi``)."""
    hi = hi if hi > lo else lo + 1.0
    counts = [0] * bins
    for v in values:
        counts[min(max(int((v - lo) / (hi - lo) * bins), 0), bins - 1)] += 1
    x0, x1, y0, y1 = 34, width - 10, 24, height - 34  # the axes
    ymax = max(counts, default=0) or 1
    bin_width = (x1 - x0) / bins

    def edge(i):
        return lo + (hi - lo) * i / bins

    return render("histogram.svg", cls=cls, title=title, xlabel=xlabel, width=width, height=height, colour=colour,
                  x0=x0, x1=x1, y0=y0, y1=y1, ymax=ymax, bin_width=bin_width, bar_width=max(bin_width - 2, 1),
                  bins=[{"x": x0 + i * bin_width, "height": (y1 - y0) * c / ymax, "count": c,
                         "lo": edge(i), "hi": edge(i + 1)} for i, c in enumerate(counts)],
                  ticks=[(x0 + i * bin_width, edge(i)) for i in range(0, bins + 1, max(1, bins // 5))])


def svg_hbars(items, *, title: str = "", width: int = 700, cls: str = "plot") -> str:
    """Horizontal bars: ``items`` = [(label, fraction 0..1, annotation)]."""
    row, x0, top = 22, 330, 24
    bars = [{"y": top + i * row, "label": label, "short": label if len(label) <= 52 else label[:50] + "…",
             "frac": _fraction(frac), "note": note} for i, (label, frac, note) in enumerate(items)]
    return render("hbars.svg", cls=cls, title=title, width=width, height=top + row * max(len(items), 1) + 10,
                  row=row, x0=x0, span=width - x0 - 70, bars=bars)


# ---------------------------------------------------------------- the student's page

def _student_view(test: TestResult, reveal_after_due: bool) -> dict:
    """A test as its student may see it: ``feedback`` (failed tests whose visibility allows it)
    or ``withheld`` (the visibility that withholds it: ``hidden`` or ``after_due_date``)."""
    vis = test.visibility
    shown = vis == "visible" or (vis == "after_due_date" and reveal_after_due)
    failed = test.status is not TestStatus.PASSED
    return {"test": test, "visibility": vis,
            "feedback": test.feedback if failed and shown else "",
            "withheld": vis if failed and not shown else "",
            "covers": [], "same_as": ""}  # a repeated feedback: the tests it also covers, or the test that says it


def _stage_view(stage: StageResult, reveal_after_due: bool) -> dict:
    """A stage on its student's page: whether it lost points, its failing and its passing tests (as the student
    may see them)."""
    passing = [t for t in stage.tests if t.status is TestStatus.PASSED]
    failing = [_student_view(t, reveal_after_due) for t in stage.tests if t.status is not TestStatus.PASSED]
    shown = [v for v in failing if v["feedback"]]
    for group in group_failures([SimpleNamespace(feedback=v["feedback"], view=v) for v in shown]):
        first, *rest = (t.view for t in group.tests)  # a repeated feedback once, naming the tests it covers
        first["covers"] = [v["test"].name for v in rest]
        for v in rest:
            v["feedback"], v["same_as"] = "", first["test"].name
    return {"stage": stage, "lost": stage.score < stage.max_score - 1e-9, "failing": failing,
            "passing": [_student_view(t, reveal_after_due) for t in passing]}


def submission_page(row: Row, chosen=(), *, reveal_after_due: bool = False, class_link: bool = False,
                    lang: str = "en") -> str:
    """The feedback page of one submission, in its report's language (``lang`` when it has no report)."""
    rep = row.graded
    if rep is None:
        return render("student.html", lang=lang, job=row.job, status=row.status, error=row.error, rep=None)
    return render("student.html", lang=rep.language or lang, job=row.job, status=row.status, error=row.error,
                  graded_at=row.graded_at, rep=rep, stages=[_stage_view(s, reveal_after_due) for s in rep.stages],
                  class_link=class_link, late=row.late,
                  fraction=_fraction(rep.score / rep.max_score if rep.max_score else 0.0),
                  notes=[e for e in rep.errors if e])


# ---------------------------------------------------------------- the class report

def _function_of(test_id: str) -> str:
    return test_id.split("[", 1)[0]


def _test_functions(stage: StageResult) -> tuple[dict, dict, bool]:
    """The stage's test functions that were attempted, each with its first case; those that failed, each with its
    first failing case; and whether some were left as stubs (a function whose failing case raised the
    starter's NotImplementedError was not attempted)."""
    tried, failed, stubs = {}, {}, set()
    for t in stage.tests:
        fn = _function_of(t.id)
        if unfinished(t):
            stubs.add(fn)
        tried.setdefault(fn, t)
        if t.status is not TestStatus.PASSED:
            failed.setdefault(fn, t)
    return ({fn: t for fn, t in tried.items() if fn not in stubs},
            {fn: t for fn, t in failed.items() if fn not in stubs}, bool(stubs))


def class_stats(rows: list[Row], chosen=()) -> dict:
    """Numbers behind the class report (also handy for tests and notebooks). The most-failed tests count only
    what was attempted: a stage not handed in, or whose module does not import, and a test whose function is
    still the starter's stub are counted apart (``not_importable``, ``unfinished``)."""
    graded = [r for r in rows if r.has_grade]
    reports = [r.graded for r in graded]
    stage_ids = [s.id for s in chosen] or sorted({s.id for rep in reports for s in rep.stages})
    per_stage = {sid: [] for sid in stage_ids}
    stage_max = {s.id: s.points for s in chosen}
    fails, attempts, names, vis = Counter(), Counter(), {}, {}
    diagnoses = defaultdict(Counter)      # test function -> diagnosis key -> submissions
    examples = {}
    unfinished = defaultdict(set)         # stage -> students with stubs still raising NotImplementedError
    not_importable = defaultdict(set)     # stage -> students whose module does not import
    for r, rep in zip(graded, reports):
        for s in rep.stages:
            stage_max.setdefault(s.id, s.max_score)
            if s.id in per_stage:
                per_stage[s.id].append(s.score)
            if s.status is StageStatus.MISSING:
                continue
            if s.import_error:
                not_importable[s.id].add(r.job.id)
                continue
            tried, failed, stubs = _test_functions(s)
            if stubs:
                unfinished[s.id].add(r.job.id)
            for fn, t in tried.items():
                names.setdefault(fn, t.name)
                vis.setdefault(fn, t.visibility)
                attempts[fn] += 1
            for fn, t in failed.items():
                fails[fn] += 1
                key = f"[{t.status.value}] " + diagnosis_key(t.feedback)
                diagnoses[fn][key] += 1
                examples.setdefault((fn, key), t.feedback)
    totals = [rep.score for rep in reports]
    return {"graded": graded, "stage_ids": stage_ids, "per_stage": per_stage, "stage_max": stage_max,
            "fails": fails, "attempts": attempts, "names": names, "visibility": vis,
            "diagnoses": diagnoses, "examples": examples, "totals": totals, "unfinished": unfinished,
            "not_importable": not_importable}


def class_page(rows: list[Row], chosen=(), *, suite: str = "", run_id=None, top: int = 15, lang: str = "en") -> str:
    """The instructors' report: score distributions, most-failed tests, most frequent mistakes, every submission;
    in ``lang``."""
    def say(msg):
        return i18n.render(msg, lang)

    st = class_stats(rows, chosen)
    graded, totals, stage_ids = st["graded"], st["totals"], st["stage_ids"]
    total_max = (sum(s.points for s in chosen if not s.bonus) if chosen
                 else (graded[0].graded.max_score if graded else 0.0))
    # The plots are markup rendered by our own autoescaped templates: Markup() passes them on unescaped.
    plots = [{"id": "plot-total", "stage": False,
              "svg": Markup(svg_histogram(totals, 0.0, float(total_max or 1), title=say(i18n.tr("total score")),
                                          xlabel=say(i18n.tr("score")), bins=10)),
              "desc": say(i18n.tr("mean {mean}, median {median}", mean=f"{statistics.fmean(totals):.2f}",
                                  median=f"{statistics.median(totals):.2f}")
                          if totals else i18n.tr("no graded submission"))}]
    for sid in stage_ids:
        vals, mx = st["per_stage"][sid], float(st["stage_max"].get(sid, 1.0))
        full = sum(abs(v - mx) < 1e-9 for v in vals)
        plots.append({"id": f"plot-{sid}", "stage": True,
                      "svg": Markup(svg_histogram(vals, 0.0, mx, title=sid, xlabel=say(i18n.tr("score")),
                                                  bins=min(10, max(4, int(mx) or 4)))),
                      "desc": say(i18n.tr("mean {mean} / {max_score}, full marks {full}/{count}",
                                          mean=f"{statistics.fmean(vals):.2f}", max_score=_fmt(mx), full=full,
                                          count=len(vals))
                                  if vals else i18n.tr("no data"))})
    ranked = sorted(st["fails"], key=lambda fn: (-st["fails"][fn] / max(st["attempts"][fn], 1), fn))[:top]
    failed = [{"fn": fn, "name": st["names"].get(fn, fn), "visibility": st["visibility"].get(fn, ""),
               "fails": st["fails"][fn], "attempts": st["attempts"][fn],
               "share": st["fails"][fn] / max(st["attempts"][fn], 1)} for fn in ranked]
    failed_bars = Markup(svg_hbars([(f"{f['fn'].split('::')[0]}: {f['name']}", f["share"],
                                     f"{f['fails']}/{f['attempts']}") for f in failed],
                                   title=say(i18n.tr("share of submissions failing the test"))))
    groups = sorted(((count, fn, key) for fn, c in st["diagnoses"].items() for key, count in c.items()),
                    key=lambda g: (-g[0], g[1], g[2]))[:top * 2]
    students = [_student_line(r, stage_ids) for r in rows]
    return render("class.html", lang=lang, n_rows=len(rows), n_graded=len(graded), suite=suite, run_id=run_id,
                  now=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  plots=plots, failed=failed, failed_bars=failed_bars,
                  unfinished=[(sid, len(v)) for sid, v in sorted(st["unfinished"].items()) if v],
                  not_importable=[(sid, sorted(v)) for sid, v in sorted(st["not_importable"].items()) if v],
                  diagnoses=[{"count": count, "fn": fn, "name": st["names"].get(fn, fn),
                              "example": st["examples"][(fn, key)]} for count, fn, key in groups],
                  stage_ids=stage_ids, students=students, any_late=any(s["late"] for s in students),
                  not_graded=[r for r in rows if not r.status.with_scores])


def _student_line(row: Row, stage_ids: list) -> dict:
    """A submission's line of the class report: its stages' scores and its total as the tests gave them, and its
    ``late`` object (None for each without a grade)."""
    rep = row.graded
    return {"job": row.job, "status": row.status, "error": row.error,
            "scores": [row.scores.get(sid, 0.0) for sid in stage_ids] if rep else None,
            "total": rep.score if rep else None, "late": row.late if rep else None}


def write_all(folder, rows: list[Row], chosen=(), *, suite: str = "", run_id=None,
              reveal_after_due: bool = False, lang: str = "en") -> None:
    """``folder/<slug>.html`` per submission (pending ones are skipped; each in its report's language, else
    ``lang``) and ``folder/class.html`` (instructors only, in ``lang``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for r in rows:
        if r.status is Status.PENDING:
            continue
        write_bytes(str(folder / f"{r.job.slug}.html"),
                    submission_page(r, chosen, reveal_after_due=reveal_after_due, lang=lang).encode())
    write_bytes(str(folder / "class.html"), class_page(rows, chosen, suite=suite, run_id=run_id, lang=lang).encode())
