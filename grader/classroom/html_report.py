"""HTML pages people look at: a feedback page per submission and a class report.

Every page is one self-contained file: inline CSS, inline SVG plots drawn
here, one small inline script (sortable tables); no external asset, no CDN,
nothing fetched. They open from a file system, an LMS upload or an e-mail.

Visibility (``stage.toml``) on the per-submission page, which is meant for the student:

* ``visible``: the test's name, status, points and, when it did not pass, its feedback;
* ``hidden``: name, status and points only; the feedback is withheld ("hidden test");
* ``after_due_date``: like ``hidden`` until the due date; pass ``reveal_after_due=True``
  (``write_all(..., reveal_after_due=True)``) to publish their feedback afterwards.

The class report (``class.html``) is for instructors and shows every test's
feedback, hidden ones included: do not publish it.
"""
from __future__ import annotations

import datetime as dt
import html
import math
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

STATUS_COLOUR = {"graded": "#0969da", "outdated": "#9a6700", "pending": "#6e7781", "unreadable": "#cf222e",
                 "passed": "#1a7f37", "failed": "#cf222e", "error": "#cf222e", "timeout": "#9a6700",
                 "crashed": "#8250df", "missing": "#6e7781"}

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --soft:#f6f8fa; --good:#1a7f37; --bad:#cf222e; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans KR", sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; max-width: 1100px; padding: 24px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 28px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin: 16px 0 6px; }
.muted { color: var(--muted); } .small { font-size: .85em; }
.score-big { font-size: 2.2em; font-weight: 700; }
.bar { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; height: 14px; overflow: hidden; }
.bar > span { display: block; height: 100%; background: var(--good); }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; } th.sortable { cursor: pointer; user-select: none; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff; font-size: .8em; font-weight: 600; }
.feedback { white-space: pre-wrap; background: #fff8f0; border-left: 3px solid #d4a72c; padding: 6px 10px;
            margin: 4px 0;
            font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .88em; }
.withheld { font-style: italic; color: var(--muted); }
.nowrap { white-space: nowrap; } .good { color: var(--good); }
details.passed-tests { border: none; padding: 0; }
details { border: 1px solid var(--line); border-radius: 8px; padding: 4px 12px; margin: 10px 0; }
details > summary { cursor: pointer; font-weight: 600; padding: 6px 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; }
.note { background: #ddf4ff; border: 1px solid #54aeff; border-radius: 6px; padding: 8px 12px; }
.warn { background: #fff1e5; border: 1px solid #d4a72c; border-radius: 6px; padding: 8px 12px; }
svg text { font-family: system-ui, sans-serif; }
"""

# Sortable tables; marks <body data-ready="1"> when it ran (tests check the page's script ran cleanly).
SCRIPT = """
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-sort'); if (v === null) v = cell.textContent.trim();
    var n = parseFloat(v); return isNaN(n) ? v.toLowerCase() : n;
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.classList.add('sortable'); th.title = 'sort';
      th.addEventListener('click', function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1;
        th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          return (x > y ? 1 : x < y ? -1 : 0) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.body.setAttribute('data-ready', '1');
})();
"""


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x is not None else ""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
            f"<body>\n{body}\n<script>{SCRIPT}</script>\n</body></html>\n")


def _badge(status: str) -> str:
    colour = STATUS_COLOUR.get(status, "#6e7781")
    return f'<span class="badge status-{esc(status)}" style="background:{colour}">{esc(status)}</span>'


def _bar(frac: float) -> str:
    frac = 0.0 if frac is None or math.isnan(frac) else max(0.0, min(1.0, frac))
    return f'<div class="bar" role="img" aria-label="{frac:.0%}"><span style="width:{frac * 100:.1f}%"></span></div>'


# ---------------------------------------------------------------- plots (inline SVG)

def svg_histogram(values, lo: float, hi: float, *, bins: int = 10, title: str = "", xlabel: str = "score",
                  width: int = 330, height: int = 190, colour: str = "#0969da", cls: str = "plot") -> str:
    """A histogram of ``values`` over [lo, hi] as inline SVG (the last bin includes ``hi``)."""
    hi = hi if hi > lo else lo + 1.0
    counts = [0] * bins
    for v in values:
        i = int((v - lo) / (hi - lo) * bins)
        counts[min(max(i, 0), bins - 1)] += 1
    ml, mr, mt, mb = 34, 10, 24, 34
    pw, ph = width - ml - mr, height - mt - mb
    top = max(counts) if counts and max(counts) > 0 else 1
    parts = [f'<svg class="{esc(cls)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
             f'<text x="{width / 2}" y="15" text-anchor="middle" font-size="12" font-weight="600">{esc(title)}</text>',
             f'<line x1="{ml}" y1="{mt + ph}" x2="{ml + pw}" y2="{mt + ph}" stroke="#59636e"/>',
             f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{mt + ph}" stroke="#59636e"/>']
    bw = pw / bins
    for i, c in enumerate(counts):
        h = ph * c / top
        x = ml + i * bw
        a, b = lo + (hi - lo) * i / bins, lo + (hi - lo) * (i + 1) / bins
        parts.append(f'<rect class="bin" x="{x + 1:.1f}" y="{mt + ph - h:.1f}" width="{max(bw - 2, 1):.1f}" '
                     f'height="{h:.1f}" fill="{colour}" data-count="{c}">'
                     f'<title>{_fmt(a)}–{_fmt(b)}: {c}</title></rect>')
        if c:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{mt + ph - h - 3:.1f}" text-anchor="middle" '
                         f'font-size="10">{c}</text>')
    for i in range(0, bins + 1, max(1, bins // 5)):
        x = ml + i * bw
        parts.append(f'<text x="{x:.1f}" y="{mt + ph + 13}" text-anchor="middle" font-size="10" '
                     f'fill="#59636e">{_fmt(lo + (hi - lo) * i / bins)}</text>')
    parts.append(f'<text x="{ml + pw / 2}" y="{height - 4}" text-anchor="middle" font-size="10" '
                 f'fill="#59636e">{esc(xlabel)}</text>')
    parts.append(f'<text x="{ml - 6}" y="{mt + 8}" text-anchor="end" font-size="10" fill="#59636e">{top}</text>')
    parts.append(f'<text x="{ml - 6}" y="{mt + ph}" text-anchor="end" font-size="10" fill="#59636e">0</text>')
    parts.append("</svg>")
    return "".join(parts)


def svg_hbars(items, *, title: str = "", width: int = 700, cls: str = "plot") -> str:
    """Horizontal bars: ``items`` = [(label, fraction 0..1, annotation)]."""
    row, ml, mt = 22, 330, 24
    height = mt + row * max(len(items), 1) + 10
    pw = width - ml - 70
    parts = [f'<svg class="{esc(cls)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
             f'<text x="{width / 2}" y="15" text-anchor="middle" font-size="12" font-weight="600">{esc(title)}</text>']
    for i, (label, frac, note) in enumerate(items):
        y = mt + i * row
        short = label if len(label) <= 52 else label[:50] + "…"
        parts.append(f'<text x="{ml - 6}" y="{y + 14}" text-anchor="end" font-size="11"><title>{esc(label)}</title>'
                     f'{esc(short)}</text>')
        parts.append(f'<rect x="{ml}" y="{y + 3}" width="{pw}" height="{row - 8}" fill="#f6f8fa" stroke="#d1d9e0"/>')
        parts.append(f'<rect class="bar" x="{ml}" y="{y + 3}" width="{pw * max(0.0, min(1.0, frac)):.1f}" '
                     f'height="{row - 8}" fill="#cf222e"/>')
        parts.append(f'<text x="{ml + pw + 6}" y="{y + 14}" font-size="11">{esc(note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ---------------------------------------------------------------- the student's page

def _visible_feedback(test: dict, reveal_after_due: bool) -> bool:
    vis = test.get("visibility", "visible")
    return vis == "visible" or (vis == "after_due_date" and reveal_after_due)


def _tests_table(tests, reveal_after_due: bool, cls: str) -> str:
    rows = [f'<table class="tests {cls}"><thead><tr><th>test</th><th>status</th><th class="num">points</th>'
            '</tr></thead><tbody>']
    for t in tests:
        vis = t.get("visibility", "visible")
        fb = ""
        if t["status"] != "passed":
            if _visible_feedback(t, reveal_after_due):
                fb = f'<div class="feedback">{esc(t["feedback"])}</div>' if t.get("feedback") else ""
            elif vis == "hidden":
                fb = '<div class="withheld">hidden test: feedback withheld</div>'
            else:
                fb = '<div class="withheld">feedback released after the due date</div>'
        label = esc(t["name"]) + (f' <span class="muted small">({esc(vis.replace("_", " "))})</span>'
                                  if vis != "visible" else "")
        rows.append(f'<tr class="test" data-status="{esc(t["status"])}" data-visibility="{esc(vis)}">'
                    f'<td>{label}<div class="muted small"><code>{esc(t["id"])}</code></div>{fb}</td>'
                    f'<td>{_badge(t["status"])}</td><td class="num nowrap">{_fmt(t["score"])} / '
                    f'{_fmt(t["max_score"])}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def submission_page(row: dict, chosen=(), *, reveal_after_due: bool = False, class_link: bool = False) -> str:
    """The feedback page of one submission (``row``: job, status, report, error, graded_at)."""
    job, rep = row["job"], row["report"]
    parts = [f'<header><h1 id="student">Feedback for {esc(job.id)}</h1>']
    if row["status"] not in ("graded", "outdated") or not rep:
        reason = row["error"] or "not graded"
        title = "could not be read" if row["status"] == "unreadable" else "was not graded"
        parts.append(f'<p class="warn" id="not-graded"><strong>This submission {title}.</strong> '
                     f'{esc(reason)}</p></header>')
        return _page(f"Feedback: {job.id}", "\n".join(parts))
    total, maximum = rep["score"], rep["max_score"]
    parts.append(f'<p><span class="score-big" id="total-score">{_fmt(total)} / {_fmt(maximum)}</span> '
                 f'<span class="muted">points'
                 + (f' &middot; bonus {_fmt(rep["bonus_score"])} / {_fmt(rep["bonus_max_score"])}'
                    if "bonus_score" in rep else "") + "</span></p>")
    parts.append(_bar(total / maximum if maximum else 0.0))
    if row["status"] == "outdated":
        parts.append('<p class="warn small" id="outdated">This grade was made with an earlier version of the '
                     'tests; it will be updated at the next grading run.</p>')
    parts.append(f'<p class="muted small">graded {esc(row.get("graded_at") or "")} &middot; submission '
                 f'<code>{esc(rep["submission"]["sha256"][:12])}</code></p></header>')
    parts.append('<h2>Score per stage</h2><table id="stages" class="sortable"><thead><tr><th>stage</th>'
                 '<th>status</th><th class="num">score</th><th class="num">max</th><th>tests passed</th>'
                 '</tr></thead><tbody>')
    for s in rep["stages"]:
        passed = sum(t["status"] == "passed" for t in s["tests"])
        parts.append(f'<tr class="stage-row" data-stage="{esc(s["id"])}"><td><a href="#stage-{esc(s["id"])}">'
                     f'{esc(s["id"])}</a> {esc(s.get("title", ""))}{" (bonus)" if s.get("bonus") else ""}</td>'
                     f'<td>{_badge(s["status"])}</td><td class="num">{_fmt(s["score"])}</td>'
                     f'<td class="num">{_fmt(s["max_score"])}</td><td>{passed}/{len(s["tests"])}</td></tr>')
    parts.append("</tbody></table>")
    parts.append('<h2>What to fix</h2><p class="muted small">Feedback of hidden tests is withheld: you see whether '
                 'they passed, not what they check. Tests released after the due date show their feedback then.</p>')
    for s in rep["stages"]:
        lost = s["score"] < s["max_score"] - 1e-9
        parts.append(f'<details class="stage" id="stage-{esc(s["id"])}"{" open" if lost else ""}><summary>'
                     f'{esc(s["id"])}: {_fmt(s["score"])} / {_fmt(s["max_score"])} {_badge(s["status"])}</summary>')
        if s.get("message"):
            parts.append(f'<p class="note">{esc(s["message"])}</p>')
        if s["status"] == "missing":
            parts.append(f'<p class="muted">{esc(s["id"])}.py was not in this submission.</p></details>')
            continue
        failing = [t for t in s["tests"] if t["status"] != "passed"]
        passing = [t for t in s["tests"] if t["status"] == "passed"]
        if failing:
            parts.append(_tests_table(failing, reveal_after_due, "failing"))
        else:
            parts.append('<p class="good">Every test of this stage passed.</p>')
        if passing:
            parts.append(f'<details class="passed-tests"><summary>{len(passing)} passed test'
                         f'{"s" if len(passing) != 1 else ""}</summary>'
                         + _tests_table(passing, reveal_after_due, "passing") + "</details>")
        parts.append("</details>")
    notes = [e for e in rep.get("errors", []) if e]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(e)}</li>" for e in notes) + "</ul>")
    if class_link:
        parts.append('<p class="small"><a href="class.html">class report</a></p>')
    return _page(f"Feedback: {job.id}", "\n".join(parts))


# ---------------------------------------------------------------- the class report

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def diagnosis_key(feedback: str) -> str:
    """Feedback with the numbers blanked: the same mistake on different data groups together."""
    text = _NUMBER.sub("#", feedback or "")
    return re.sub(r"\s+", " ", text).strip()[:400]


def _function_of(test_id: str) -> str:
    return test_id.split("[", 1)[0]


def class_stats(rows: list, chosen=()) -> dict:
    """Numbers behind the class report (also handy for tests and notebooks)."""
    graded = [r for r in rows if r["status"] in ("graded", "outdated") and r["report"]]
    stage_ids = [s.id for s in chosen] or sorted({s["id"] for r in graded for s in r["report"]["stages"]})
    per_stage = {sid: [] for sid in stage_ids}
    stage_max = {s.id: s.points for s in chosen}
    fails, attempts, names, vis = Counter(), Counter(), {}, {}
    diagnoses = defaultdict(Counter)      # test function -> diagnosis key -> submissions
    examples = {}
    unfinished = defaultdict(set)         # stage -> students with stubs still raising NotImplementedError
    for r in graded:
        for s in r["report"]["stages"]:
            stage_max.setdefault(s["id"], s["max_score"])
            if s["id"] in per_stage:
                per_stage[s["id"]].append(s["score"])
            if s["status"] == "missing":
                continue
            seen_fail, seen = {}, set()
            for t in s["tests"]:
                fn = _function_of(t["id"])
                names.setdefault(fn, t["name"])
                vis.setdefault(fn, t.get("visibility", "visible"))
                seen.add(fn)
                if t["status"] != "passed" and fn not in seen_fail:
                    seen_fail[fn] = t
            for fn in seen:
                attempts[fn] += 1
            for fn, t in seen_fail.items():
                fails[fn] += 1
                if "NotImplementedError" in (t.get("feedback") or ""):  # a stub left as is: not a mistake
                    unfinished[s["id"]].add(r["job"].id)
                    continue
                key = f"[{t['status']}] " + diagnosis_key(t.get("feedback", ""))
                diagnoses[fn][key] += 1
                examples.setdefault((fn, key), t.get("feedback", ""))
    totals = [r["report"]["score"] for r in graded]
    return {"graded": graded, "stage_ids": stage_ids, "per_stage": per_stage, "stage_max": stage_max,
            "fails": fails, "attempts": attempts, "names": names, "visibility": vis,
            "diagnoses": diagnoses, "examples": examples, "totals": totals, "unfinished": unfinished}


def class_page(rows: list, chosen=(), *, suite: str = "", run_id=None, top: int = 15) -> str:
    st = class_stats(rows, chosen)
    graded, totals = st["graded"], st["totals"]
    total_max = (sum(s.points for s in chosen if not s.bonus) if chosen
                 else (graded[0]["report"]["max_score"] if graded else 0.0))
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    not_graded = [r for r in rows if r["status"] not in ("graded", "outdated")]
    parts = ['<header><h1>Class report</h1>',
             f'<p class="muted small">{len(rows)} submissions, {len(graded)} graded, {len(not_graded)} not graded'
             f' &middot; suite <code>{esc(suite[:12])}</code>'
             + (f' &middot; run {esc(run_id)}' if run_id is not None else "") + f' &middot; {esc(now)}</p>',
             '<p class="warn small">Instructors only: this page shows the feedback of hidden tests.</p></header>']
    # totals
    parts.append('<h2 id="distribution">Score distribution</h2><div class="grid">')
    desc = (f"mean {statistics.fmean(totals):.2f}, median {statistics.median(totals):.2f}"
            if totals else "no graded submission")
    plot = svg_histogram(totals, 0.0, float(total_max or 1), title="total score", bins=10)
    parts.append(f'<div class="card" id="plot-total">{plot}'
                 f'<div class="small muted">{desc}</div></div>')
    for sid in st["stage_ids"]:
        vals, mx = st["per_stage"][sid], float(st["stage_max"].get(sid, 1.0))
        full = sum(abs(v - mx) < 1e-9 for v in vals)
        d = (f"mean {statistics.fmean(vals):.2f} / {_fmt(mx)}, full marks {full}/{len(vals)}" if vals else "no data")
        parts.append(f'<div class="card stage-plot" id="plot-{esc(sid)}">'
                     f'{svg_histogram(vals, 0.0, mx, title=sid, bins=min(10, max(4, int(mx) or 4)))}'
                     f'<div class="small muted">{d}</div></div>')
    parts.append("</div>")
    # most-failed tests
    ranked = sorted(st["fails"], key=lambda fn: (-st["fails"][fn] / max(st["attempts"][fn], 1), fn))[:top]
    parts.append('<h2 id="most-failed">Most-failed tests</h2>')
    if ranked:
        items = [(f"{fn.split('::')[0]}: {st['names'].get(fn, fn)}", st["fails"][fn] / max(st["attempts"][fn], 1),
                  f"{st['fails'][fn]}/{st['attempts'][fn]}") for fn in ranked]
        parts.append(svg_hbars(items, title="share of submissions failing the test"))
        parts.append('<table id="failed-tests" class="sortable"><thead><tr><th>test</th><th>visibility</th>'
                     '<th class="num">failing</th><th class="num">share</th></tr></thead><tbody>')
        for fn in ranked:
            share = st["fails"][fn] / max(st["attempts"][fn], 1)
            parts.append(f'<tr class="failed-test"><td>{esc(st["names"].get(fn, fn))}<div class="muted small">'
                         f'<code>{esc(fn)}</code></div></td><td>{esc(st["visibility"].get(fn, ""))}</td>'
                         f'<td class="num">{st["fails"][fn]}/{st["attempts"][fn]}</td>'
                         f'<td class="num" data-sort="{share:.4f}">{share:.0%}</td></tr>')
        parts.append("</tbody></table>")
    else:
        parts.append('<p class="muted">No test failed.</p>')
    # diagnoses
    parts.append('<h2 id="diagnoses">Mistakes most often diagnosed</h2><p class="muted small">The feedback of '
                 'failing tests, grouped by test and by message (numbers blanked), most frequent first. Stubs left '
                 'unimplemented (NotImplementedError) are counted apart.</p>')
    unfinished = {sid: sorted(v) for sid, v in st["unfinished"].items() if v}
    if unfinished:
        parts.append('<p id="unfinished" class="note small">Not implemented yet: '
                     + "; ".join(f'{esc(sid)}: {len(v)} submission{"s" if len(v) != 1 else ""}'
                                 for sid, v in sorted(unfinished.items())) + "</p>")
    groups = [(count, fn, key) for fn, c in st["diagnoses"].items() for key, count in c.items()]
    groups.sort(key=lambda g: (-g[0], g[1], g[2]))
    if groups:
        parts.append('<table id="diagnosis-table" class="sortable"><thead><tr><th class="num">submissions</th>'
                     '<th>test</th><th>feedback (one example)</th></tr></thead><tbody>')
        for count, fn, key in groups[:top * 2]:
            ex = st["examples"][(fn, key)]
            parts.append(f'<tr class="diagnosis"><td class="num">{count}</td><td>{esc(st["names"].get(fn, fn))}'
                         f'<div class="muted small"><code>{esc(fn)}</code></div></td>'
                         f'<td><div class="feedback">{esc(ex)}</div></td></tr>')
        parts.append("</tbody></table>")
    else:
        parts.append('<p class="muted">Nothing diagnosed.</p>')
    # students
    parts.append('<h2 id="students">Submissions</h2><table id="student-table" class="sortable"><thead><tr>'
                 '<th>student</th><th>status</th>'
                 + "".join(f'<th class="num">{esc(sid)}</th>' for sid in st["stage_ids"])
                 + '<th class="num">total</th></tr></thead><tbody>')
    for r in rows:
        job, rep = r["job"], r["report"]
        if r["status"] in ("graded", "outdated") and rep:
            per = {s["id"]: s["score"] for s in rep["stages"]}
            cells = "".join(f'<td class="num">{_fmt(per.get(sid, 0.0))}</td>' for sid in st["stage_ids"])
            total = f'<td class="num">{_fmt(rep["score"])}</td>'
        else:
            cells = "".join('<td class="num"></td>' for _ in st["stage_ids"])
            total = f'<td class="num" title="{esc(r["error"])}">–</td>'
        name = (esc(job.id) if r["status"] == "pending" else f'<a href="{esc(job.slug)}.html">{esc(job.id)}</a>')
        parts.append(f'<tr class="student"><td>{name}</td>'
                     f'<td>{_badge(r["status"])}</td>{cells}{total}</tr>')
    parts.append("</tbody></table>")
    if not_graded:
        parts.append('<section id="not-graded"><h2>Not graded</h2><ul>'
                     + "".join(f'<li><strong>{esc(r["job"].id)}</strong> ({esc(r["status"])}): {esc(r["error"])}</li>'
                               for r in not_graded) + "</ul></section>")
    return _page("Class report", "\n".join(parts))


def write_all(folder, rows: list, chosen=(), *, suite: str = "", run_id=None, reveal_after_due: bool = False) -> None:
    """``folder/<slug>.html`` per submission (pending ones are skipped) and ``folder/class.html``."""
    from grader.engine.atomic import write_bytes
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for r in rows:
        if r["status"] == "pending":
            continue
        write_bytes(str(folder / f"{r['job'].slug}.html"),
                    submission_page(r, chosen, reveal_after_due=reveal_after_due).encode())
    write_bytes(str(folder / "class.html"), class_page(rows, chosen, suite=suite, run_id=run_id).encode())
