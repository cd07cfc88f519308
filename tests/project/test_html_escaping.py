"""Student-supplied text on the HTML pages is escaped by the templates' autoescaping.

Unit checks of grader.classroom.html_report without a browser (the pages in
Chromium: test_html_reports.py). A submission id, a test's name and its
feedback all carry markup, quotes and ampersands; every page must show them as
text: no element, no attribute and no entity comes from them.
"""
from __future__ import annotations

from html.parser import HTMLParser

import pytest
from conftest import made_report

from grader.classroom import html_report
from grader.classroom.discovery import Job
from grader.classroom.rows import Row, Status

EVIL = '<script>alert(1)</script> "quoted" & <b onmouseover="x()">bold</b>'


class _Page(HTMLParser):
    """The elements, attribute values and text of a page, entities decoded."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.text = [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [v for _, v in attrs if v]

    def handle_data(self, data):
        self.text.append(data)


def _rows():
    tests = [{"id": f"a01_similarity::test_{n}[{EVIL}]", "name": f"{n} {EVIL}", "score": 0.0, "max_score": 1.0,
              "status": "failed", "visibility": v, "feedback": f"{n} feedback {EVIL}", "duration_s": 0.0}
             for n, v in (("shown", "visible"), ("later", "after_due_date"))]
    rep = made_report([{"id": "a01_similarity", "title": f"title {EVIL}", "score": 0.0, "max_score": 2.0,
                        "message": f"message {EVIL}", "tests": tests}],
                      submission={"id": EVIL, "path": "x", "sha256": "0" * 64}, errors=[f"note {EVIL}"])
    graded = Row(Job(EVIL, 'slug"&<x>', "x", "folder", "0" * 64), Status.GRADED, rep)
    broken = Row(Job(f"broken {EVIL}", "broken", "x", "zip"), Status.UNREADABLE, error=f"bad zip {EVIL}")
    return graded, broken


def _pages():
    graded, broken = _rows()
    return {"student": html_report.submission_page(graded, reveal_after_due=True, class_link=True),
            "unreadable": html_report.submission_page(broken),
            "class": html_report.class_page([graded, broken], suite="0" * 64, run_id=1)}


@pytest.mark.parametrize("name", ["student", "unreadable", "class"])
def test_student_text_is_escaped_not_interpreted(name):
    page = _pages()[name]
    assert "<script>alert" not in page and "<b onmouseover" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '"quoted"' not in page and " & " not in page, "quotes and ampersands are escaped too"
    parsed = _Page(page)
    assert parsed.tags.count("script") == 1, "only the page's own script"
    assert "b" not in parsed.tags
    text = "".join(parsed.text)
    assert EVIL in text, "the text reads back as written"


def test_escaped_text_is_all_there():
    """Each piece of student text is on the page it belongs to (escaped, yet complete)."""
    pages = {k: _Page(v) for k, v in _pages().items()}
    student = "".join(pages["student"].text)
    for piece in (f"Feedback for {EVIL}", f"shown {EVIL}", f"shown feedback {EVIL}", f"later feedback {EVIL}",
                  f"title {EVIL}", f"message {EVIL}", f"note {EVIL}"):
        assert piece in student, piece
    assert f"bad zip {EVIL}" in "".join(pages["unreadable"].text)
    klass = pages["class"]
    assert f"shown feedback {EVIL}" in "".join(klass.text)
    assert 'slug"&<x>.html' in klass.attrs, "the link to the student's page keeps its (escaped) slug"
    assert f"bad zip {EVIL}" in klass.attrs, "the reason a submission was not graded, as a tooltip"
