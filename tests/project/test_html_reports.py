"""The HTML feedback pages and the class report render in a real browser (headless Chromium).

Chromium is installed by scripts/setup-chromium.sh when missing. Each page is
loaded from disk with the network unreachable (no external asset is allowed
anyway), its DOM is dumped after the inline script ran, console messages are
read from Chromium's log, and a screenshot must not be blank.
"""
from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT, made_report

from grader.authoring import mutants
from grader.classroom import html_report
from grader.classroom.discovery import Job
from grader.classroom.rows import Row, Status
from grader.engine.feedback_groups import diagnosis_key

PY = sys.executable
STAGES = [s for s in ("a01_similarity", "a02_softmax")   # the numpy stages (a02 while it is being written)
          if (ROOT / "assignments" / s / "stage.toml").exists()
          and (ROOT / "tests" / "hidden" / f"test_{s}.py").exists()]


# ---------------------------------------------------------------- a tiny DOM

class Node:
    def __init__(self, tag, attrs, parent=None):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, dict(attrs), parent, [], ""

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, tag=None, cls=None, **attrs):
        return [n for n in self.iter() if (tag is None or n.tag == tag)
                and (cls is None or cls in (n.attrs.get("class") or "").split())
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_id(self, ident):
        found = [n for n in self.iter() if n.attrs.get("id") == ident]
        assert found, f"no element with id {ident!r}"
        return found[0]

    def all_text(self):
        return self.text + "".join(c.all_text() for c in self.children)


VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "source", "wbr", "line", "rect", "path"}


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {})

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        t = Node("#text", {}, self.cur)
        t.text = data
        self.cur.children.append(t)


def parse(text: str) -> Node:
    b = _Builder()
    b.feed(text)
    return b.root


# ---------------------------------------------------------------- Chromium

@pytest.fixture(scope="module")
def chromium():
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "setup-chromium.sh")], capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def browse(chromium: str, page: Path, tmp: Path, *extra) -> tuple[str, list]:
    """Load ``page`` headless; return (stdout, console messages)."""
    profile = tmp / f"profile-{page.stem}-{len(list(tmp.iterdir()))}"
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
            "--proxy-server=127.0.0.1:9",  # any attempt to fetch something from the network fails
            *extra, page.resolve().as_uri()]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    shutil.rmtree(profile, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def dump_dom(chromium, page, tmp) -> Node:
    out, console = browse(chromium, page, tmp, "--dump-dom")
    assert console == [], f"{page.name} wrote to the console: {console}"
    dom = parse(out)
    assert dom.find_all("body")[0].attrs.get("data-ready") == "1", f"{page.name}: the page's script did not run"
    return dom


def test_the_console_check_itself_catches_a_script_error(chromium, tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefined_function();</script></body></html>")
    _, console = browse(chromium, page, tmp_path, "--dump-dom")
    assert any("undefined_function" in line for line in console), "Chromium's console log is not being read"


# ---------------------------------------------------------------- a graded class

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """alice: the reference; bob: the stubs (.zip); carol: a catalogued a01 mistake; dave: a corrupt zip."""
    base = tmp_path_factory.mktemp("html")
    subs = base / "class"
    subs.mkdir()
    for name, src in (("alice", ROOT / "solutions"), ("bob-src", ROOT / "starter")):
        (subs / name if name == "alice" else base / name).mkdir()
        for s in STAGES:
            shutil.copy(src / f"{s}.py", (subs / name if name == "alice" else base / name) / f"{s}.py")
    with zipfile.ZipFile(subs / "bob.zip", "w") as z:
        for s in STAGES:
            z.write(base / "bob-src" / f"{s}.py", f"{s}.py")
    mutant = next(m for m in mutants.load("a01_similarity") if "loop" not in m.id)
    mutants.build_submission(mutant, base / "carol-src")
    (subs / "carol").mkdir()
    for s in STAGES:
        shutil.copy(base / "carol-src" / f"{s}.py", subs / "carol" / f"{s}.py")
    (subs / "dave.zip").write_bytes(b"PK\x03\x04 broken")
    out = base / "out"
    proc = subprocess.run([PY, "-m", "grader", "batch", str(subs), "--stages", ",".join(STAGES), "--workers", "2",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {p.stem: json.loads(p.read_text()) for p in (out / "reports").glob("*.json")}
    return out, reports


def test_pages_are_self_contained(graded):
    out, _ = graded
    pages = sorted((out / "html").glob("*.html"))
    assert [p.name for p in pages] == ["alice.html", "bob.html", "carol.html", "class.html", "dave.html"]
    for page in pages:
        text = page.read_text()
        assert text.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in text
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text, re.I), f"{page.name} loads from the web"
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", text, re.I) and "@import" not in text
        assert "<link" not in text, f"{page.name} links an external stylesheet"


def test_a_students_page_renders_scores_and_feedback(graded, chromium, tmp_path):
    out, reports = graded
    rep = reports["carol"]
    dom = dump_dom(chromium, out / "html" / "carol.html", tmp_path)
    assert "carol" in dom.by_id("student").all_text()
    total = dom.by_id("total-score").all_text()
    assert total == f"{html_report._fmt(rep['score'])} / {html_report._fmt(rep['max_score'])}"
    rows = dom.by_id("stages").find_all("tr", cls="stage-row")
    assert [r.attrs["data-stage"] for r in rows] == STAGES
    failing = [t for s in rep["stages"] for t in s["tests"] if t["status"] != "passed"]
    assert failing, "the catalogued mistake fails some test"
    shown = dom.find_all("tr", cls="test")
    assert sum(r.attrs["data-status"] != "passed" for r in shown) == len(failing)
    assert len(shown) == sum(len(s["tests"]) for s in rep["stages"]), "every test is listed (passed ones folded)"
    page_text = dom.all_text()
    for t in failing:  # each visible feedback is there, once for the tests that repeat it on other numbers
        if t["visibility"] == "visible":
            first = next(x for x in failing if x["visibility"] == "visible"
                         and diagnosis_key(x["feedback"]) == diagnosis_key(t["feedback"]))
            assert first["feedback"] in page_text, f"the feedback of {t['id']} is missing"
            assert t is first or f"The same feedback as “{first['name']}” above." in page_text, t["id"]
    # a look at it: a screenshot that is not blank
    shot = tmp_path / "carol.png"
    browse(chromium, out / "html" / "carol.html", tmp_path, f"--screenshot={shot}", "--window-size=1100,1400",
           "--hide-scrollbars")
    import matplotlib.image as mpimg
    pixels = mpimg.imread(str(shot))
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    assert pixels[..., :3].std() > 0.05, "the screenshot is blank"
    dark = (pixels[..., :3].mean(axis=2) < 0.5).mean()
    assert 0.005 < dark < 0.5, f"{dark:.3f} of the screenshot is text/graphics: nothing or everything rendered?"


def test_hidden_tests_show_status_but_no_feedback_on_the_students_page(graded, chromium, tmp_path):
    out, reports = graded
    rep = reports["bob"]  # the stubs fail every test, hidden ones included
    dom = dump_dom(chromium, out / "html" / "bob.html", tmp_path)
    rows = dom.find_all("tr", cls="test")
    withheld = [t for s in rep["stages"] for t in s["tests"] if t["visibility"] != "visible"]
    assert withheld, "a01/a02 have hidden or after-due-date tests"
    for r in rows:
        has_feedback = bool(r.find_all("div", cls="feedback"))
        if r.attrs["data-visibility"] == "visible":
            assert not r.find_all("div", cls="withheld")
        else:
            assert not has_feedback and r.find_all("div", cls="withheld")
    assert sum(r.attrs["data-visibility"] != "visible" for r in rows) == len(withheld)


def test_visibility_rules_exactly():
    """Unit check with made-up feedback, so that no other test's text can mask a leak."""
    tests = [{"id": f"a01_similarity::{n}", "name": n, "score": 0.0, "max_score": 1.0, "status": "failed",
              "visibility": v, "feedback": fb, "duration_s": 0.0}
             for n, v, fb in (("t_vis", "visible", "VISIBLE-FEEDBACK-1"), ("t_hid", "hidden", "SECRET-FEEDBACK-2"),
                              ("t_due", "after_due_date", "LATER-FEEDBACK-3"))]
    rep = made_report([{"id": "a01_similarity", "title": "t", "score": 0.0, "max_score": 3.0, "tests": tests}])
    row = Row(Job("x", "x", "x", "folder", "0" * 64), Status.GRADED, rep)
    page = html_report.submission_page(row)
    assert "VISIBLE-FEEDBACK-1" in page
    assert "SECRET-FEEDBACK-2" not in page and "hidden test: feedback withheld" in page
    assert "LATER-FEEDBACK-3" not in page and "released after the due date" in page
    later = html_report.submission_page(row, reveal_after_due=True)
    assert "LATER-FEEDBACK-3" in later and "SECRET-FEEDBACK-2" not in later
    everything = html_report.class_page([row])
    assert all(f in everything for f in ("VISIBLE-FEEDBACK-1", "SECRET-FEEDBACK-2", "LATER-FEEDBACK-3"))
    assert "<script>alert" not in html_report.submission_page(
        dataclasses.replace(row, job=Job("<script>alert(1)</script>", "x", "x", "folder"))), "ids are escaped"


def test_an_unreadable_submission_has_a_page_that_says_why(graded, chromium, tmp_path):
    out, _ = graded
    dom = dump_dom(chromium, out / "html" / "dave.html", tmp_path)
    assert "zip" in dom.by_id("not-graded").all_text()


def test_the_class_report_renders_distributions_failures_and_diagnoses(graded, chromium, tmp_path):
    out, reports = graded
    dom = dump_dom(chromium, out / "html" / "class.html", tmp_path)
    graded_reps = [r for k, r in reports.items() if k != "dave"]

    def bins(ident):
        return [int(r.attrs["data-count"]) for r in dom.by_id(ident).find_all("rect", cls="bin")]

    assert sum(bins("plot-total")) == len(graded_reps) == 3
    for s in STAGES:
        counts = bins(f"plot-{s}")
        assert sum(counts) == 3 and counts[0] >= 1 and counts[-1] >= 1, f"{s}: the stubs score 0, the reference full"
    # most-failed tests: carol's mistake, among the two who attempted each test (bob's stubs are counted apart,
    # not as failures); shares are sorted
    rows = dom.by_id("failed-tests").find_all("tr", cls="failed-test")
    assert rows
    shares = [float(r.find_all("td")[3].attrs["data-sort"]) for r in rows]
    assert shares == sorted(shares, reverse=True) and shares[0] == 0.5
    assert {r.find_all("td")[2].all_text() for r in rows} == {"1/2"}
    assert "bob" not in dom.by_id("failed-tests").all_text() and "Not implemented yet" in dom.all_text()
    carol_failing = {t["id"].split("[")[0] for s in reports["carol"]["stages"] for t in s["tests"]
                     if t["status"] != "passed"}
    listed = {r.find_all("code")[0].all_text() for r in rows}
    assert carol_failing <= listed or len(rows) == 15
    # diagnoses: the failing feedback grouped by test; carol's feedback is there
    diag = dom.by_id("diagnosis-table").find_all("tr", cls="diagnosis")
    assert diag and all(int(r.find_all("td")[0].all_text()) >= 1 for r in diag)
    text = dom.by_id("diagnosis-table").all_text()
    carol_fb = [t["feedback"] for s in reports["carol"]["stages"] for t in s["tests"] if t["status"] != "passed"]
    assert any(fb in text for fb in carol_fb), "carol's mistake is not among the diagnoses"
    # every student, with a link to the page; dave is listed as not graded, with the reason
    students = dom.by_id("student-table").find_all("tr", cls="student")
    assert len(students) == 4
    assert {a.attrs["href"] for a in dom.by_id("student-table").find_all("a")} == {
        "alice.html", "bob.html", "carol.html", "dave.html"}
    assert "dave" in dom.by_id("not-graded").all_text() and "zip" in dom.by_id("not-graded").all_text()
    shot = tmp_path / "class.png"
    browse(chromium, out / "html" / "class.html", tmp_path, f"--screenshot={shot}", "--window-size=1200,1600")
    assert shot.stat().st_size > 20_000


def test_diagnoses_group_the_same_mistake_on_different_numbers():
    a = "similarity_matrix(Q (3, 4), K (5, 4)) is off by 0.25: got 1.5, expected 1.25. The usual cause is K.T"
    b = "similarity_matrix(Q (6, 2), K (1, 2)) is off by 3e-2: got -4, expected 7. The usual cause is K.T"
    assert diagnosis_key(a) == diagnosis_key(b)
    assert diagnosis_key(a) != diagnosis_key("a different message 1")
    shapes = ("softmax(<ndarray (3,)>) raised NotImplementedError",
              "softmax(<ndarray (2, 4)>) raised NotImplementedError")
    assert diagnosis_key(shapes[0]) == diagnosis_key(shapes[1]), "a shape counts as one number"
    assert diagnosis_key("softmax(x, axis=0) is off") != diagnosis_key("log_softmax(x, axis=0) is off")
    assert html.escape("<") == "&lt;"


def test_a_repeated_feedback_is_shown_once_with_the_tests_it_covers():
    """Two visible tests failing with the same paragraph on other numbers: the page says it once, under the first,
    naming the other; a hidden test's feedback stays withheld and names nothing."""
    tests = [{"id": f"a01_similarity::{n}", "name": n, "score": 0.0, "max_score": 1.0, "status": "failed",
              "visibility": v, "feedback": fb, "duration_s": 0.0}
             for n, v, fb in (("t_one", "visible", "REPEATED off by 0.5 at (1, 2)"),
                              ("t_two", "visible", "REPEATED off by 0.25 at (0, 3)"),
                              ("t_hid", "hidden", "REPEATED off by 0.125 at (2, 2)"))]
    rep = made_report([{"id": "a01_similarity", "title": "t", "score": 0.0, "max_score": 3.0, "tests": tests}])
    page = html_report.submission_page(Row(Job("x", "x", "x", "folder", "0" * 64), Status.GRADED, rep))
    assert page.count("REPEATED") == 1 and "off by 0.5" in page
    assert "The same feedback for: t_two" in page and "The same feedback as “t_one” above." in page
    assert "t_hid" not in page.split("The same feedback for:")[1].split("</div>")[0]
