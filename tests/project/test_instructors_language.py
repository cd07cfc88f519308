"""What instructors read follows the course's language (issue 38): the batch's console, the class page and the
students' pages' frame, the similarity report and the template repository's README are Korean with `--lang ko`
(or course.toml's `language = "ko"`) and English by default; `grades.csv` and `grades-canvas.csv` keep their
English column names whatever the language (spreadsheets and Canvas's import read them)."""
from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from grader.authoring import github_template
from grader.classroom import canvas, grades_csv

HANGUL = re.compile("[\uac00-\ud7a3]")
STAGES = "a01_similarity,a02_softmax"
# The class page's headings and table headers, as each language says them.
CLASS_PAGE = {"en": ["<h1>Class report</h1>", ">Score distribution</h2>", ">Most-failed tests</h2>",
                     ">Mistakes most often diagnosed</h2>", ">Submissions</h2>", "<th>student</th>",
                     ">total</th>", ">late days used</th>"],
              "ko": ["<h1>반 보고서</h1>", ">점수 분포</h2>", ">가장 많이 실패한 테스트</h2>",
                     ">가장 자주 진단된 실수</h2>", ">제출물</h2>", "<th>학생</th>", ">합계</th>",
                     ">사용한 지각일</th>"]}
# What the batch prints: its first line, a graded submission, the class table's title and the last line.
CONSOLE = {"en": ["batch run 1: 3 submissions in", "graded alice: 16/16", "class summary: 3 graded of 3",
                  "found 3, graded now 3, already graded 0", "outputs: "],
           "ko": ["일괄 채점 실행 1: ", "채점됨 alice: 16/16", "반 요약: 제출물 3개 중 3개 채점됨",
                  "찾음 3, 이번에 채점 3, 이미 채점됨 0", "출력: "]}


def _class(folder: Path) -> Path:
    """alice and bob hand in the reference (a copy: the similarity report flags them), carol the starter."""
    for who, source in (("alice", "solutions"), ("bob", "solutions"), ("carol", "starter")):
        (folder / who).mkdir(parents=True)
        for stage in STAGES.split(","):
            shutil.copy(ROOT / source / f"{stage}.py", folder / who / f"{stage}.py")
    return folder


def _course_without_language(path: Path) -> Path:
    """The repository's course.toml (its late policy: the students' pages get their Deadlines section) with no
    ``language``: the grader's own default."""
    text = (ROOT / "course.toml").read_text(encoding="utf-8")
    path.write_text(re.sub(r"(?m)^language\s*=.*$", "", text), encoding="utf-8")
    return path


def _grader(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    """language -> (the batch's output folder, what it printed): the tiny class graded with `--lang ko`, and with
    no `--lang` under a course.toml that names no language."""
    base = tmp_path_factory.mktemp("instructors-language")
    subs = _class(base / "class")
    course = _course_without_language(base / "course.toml")
    runs = {}
    for language, extra in (("ko", ["--lang", "ko"]), ("en", [])):
        out = base / f"out-{language}"
        done = _grader("batch", subs, "--out", out, "--stages", STAGES, "--workers", 1, "--course", course, *extra)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        runs[language] = (out, done.stdout)
    return runs


@pytest.mark.parametrize("language", ["ko", "en"])
def test_the_batch_prints_in_the_courses_language(batches, language):
    _, printed = batches[language]
    other = "en" if language == "ko" else "ko"
    for words in CONSOLE[language]:
        assert words in printed, (words, printed)
    for words in CONSOLE[other]:
        assert words not in printed, (words, printed)
    if language == "en":
        assert not HANGUL.search(printed), printed
    else:  # the Canvas warning (course.toml names no export) too
        assert "경고: grades-canvas.csv를 Canvas의 학생과 연결할 수 없습니다" in printed, printed


@pytest.mark.parametrize("language", ["ko", "en"])
def test_the_class_page_speaks_the_courses_language(batches, language):
    out, _ = batches[language]
    page = (out / "html" / "class.html").read_text(encoding="utf-8")
    other = "en" if language == "ko" else "ko"
    assert f'<html lang="{language}">' in page
    for heading in CLASS_PAGE[language]:
        assert heading in page, heading
    for heading in CLASS_PAGE[other]:
        assert heading not in page, heading
    graded = re.findall(r'class="badge status-graded"[^>]*>([^<]*)<', page)
    assert graded == ["채점됨" if language == "ko" else "graded"] * 3, graded
    assert f'data-sort-title="{"정렬" if language == "ko" else "sort"}"' in page  # the sortable headers' tooltip
    if language == "en":
        assert not HANGUL.search(page)


@pytest.mark.parametrize("language", ["ko", "en"])
def test_the_students_pages_frame_speaks_the_courses_language(batches, language):
    out, _ = batches[language]
    page = (out / "html" / "carol.html").read_text(encoding="utf-8")
    assert f'<html lang="{language}">' in page
    korean = ["<h2>단계별 점수</h2>", '<h2 id="lateness">마감</h2>', "지각일 4일은 마감 순서대로",
              "마감 후 15분 안이면 제시간이고", "<td>시각 모름</td>"]
    english = ["<h2>Score per stage</h2>", '<h2 id="lateness">Deadlines</h2>', "Your 4 late days are spent",
               "Within 15 minutes of the deadline", "<td>no time known</td>"]
    shown, hidden = (korean, english) if language == "ko" else (english, korean)
    for words in shown:
        assert words in page, words
    for words in hidden:
        assert words not in page, words


def _first_rows(path: Path, count: int = 1) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        return [next(reader) for _ in range(count)]


def test_grades_csv_and_canvas_keep_their_english_column_names(batches):
    """Spreadsheets and Canvas's import read the column names: the same English ones in a Korean batch."""
    stage_ids = STAGES.split(",")
    grades = ["student", *stage_ids, "total", "bonus", "max_total", *grades_csv.LATE_COLUMNS,
              *grades_csv.FINAL_COLUMNS, "status", "error", "sha256", "graded_at", *(f"{s} status" for s in stage_ids)]
    for language in ("ko", "en"):
        out, _ = batches[language]
        assert _first_rows(out / "grades.csv") == [grades], language
        canvas_rows = _first_rows(out / "grades-canvas.csv", 2)
        assert canvas_rows[0][:5] == list(canvas.IDENTITY) and canvas_rows[1][0] == canvas.POINTS_ROW, language
        assert not HANGUL.search((out / "grades-canvas.csv").read_text(encoding="utf-8")), language
        with open(out / "grades.csv", newline="", encoding="utf-8") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        assert rows["alice"]["status"] == "graded" and rows["carol"][f"{stage_ids[0]} status"] == "not handed in"
    ko, en = (batches[language][0] / "grades-canvas.csv" for language in ("ko", "en"))
    assert _first_rows(ko, 2) == _first_rows(en, 2)


def test_the_similarity_report_speaks_korean_on_request(batches):
    out, _ = batches["ko"]
    done = _grader("similarity", out, "--lang", "ko")
    assert done.returncode == 0, done.stderr[-2000:]
    for words in ("단계 쌍은 60% 이상이면 표시됩니다", "alice & bob: 단계 2개 중 2개 표시됨", "페이지: "):
        assert words in done.stdout, done.stdout
    assert "flagged" not in done.stdout and "page: " not in done.stdout, done.stdout
    page = (out / "html" / "similarity.html").read_text(encoding="utf-8")
    assert '<html lang="ko">' in page and "<h1>유사도 보고서</h1>" in page and ">쌍, 가장 비슷한 것부터</h2>" in page
    assert "Similarity report" not in page and "Pairs, most similar first" not in page and ">flagged<" not in page
    assert (out / "similarity.csv").read_text(encoding="utf-8").startswith("student_a,student_b,stage,")


def _links(text: str) -> set:
    """The files a README sends the other language's readers to (the bundle's "한국어: `…`" / "English: `…`")."""
    return set(re.findall(r"(?:한국어|English): `(README[^`]*\.md)`", text))


@pytest.mark.parametrize("language,files,first", [
    ("en", {"README.md", "README.ko.md"}, "# Transformer course — your assignment repository"),
    ("ko", {"README.md", "README.en.md"}, "# 트랜스포머 과목 — 여러분의 과제 저장소"),
    ("both", {"README.md", "README.ko.md"}, "# 트랜스포머 과목 — 여러분의 과제 저장소"),
])
def test_classroom_writes_the_readme_in_the_language_asked(tmp_path, language, files, first):
    out = tmp_path / "template"
    done = _grader("classroom", out, "--lang", language, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {p.name for p in out.glob("README*.md")} == files
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(first), readme[:200]
    korean, english = "**이 저장소는 공개 검사만 실행합니다.**", "**This repository runs the public checks only.**"
    assert (korean in readme) == (language != "en") and (english in readme) == (language != "ko")
    if language == "both":
        assert readme.index(korean) < readme.index(english)
    for name in files:  # every README names the other language's file as it is here
        text = (out / name).read_text(encoding="utf-8")
        assert _links(text) and _links(text) <= files, (name, _links(text))


def test_the_readme_follows_course_toml_by_default(tmp_path, monkeypatch):
    """No `--lang`: course.toml's language (``build`` reads it when given none)."""
    course = tmp_path / "course.toml"
    course.write_text('language = "ko"\n', encoding="utf-8")
    monkeypatch.setattr("grader.i18n.languages.COURSE_TOML", course)
    out = github_template.build(str(tmp_path / "template"))
    assert (out / "README.md").read_text(encoding="utf-8").startswith("# 트랜스포머 과목")
    assert (out / "README.en.md").read_text(encoding="utf-8").startswith("# Transformer course")


def test_both_prints_each_line_in_korean_then_in_english_and_escapes_what_it_quotes():
    """`--lang both`: a console line is said whole in Korean, then in English (not word by word); a student's id or
    an error that looks like rich markup is printed as it is."""
    from rich.console import Console

    from grader.classroom import summary
    from grader.classroom.rows import STATUS_WORDS
    said = summary.line("red", STATUS_WORDS["error"], "bob[bold]: boom", "both", width=6)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(said, highlight=False)
    assert console.file.getvalue() == "  오류 bob[bold]: boom\n error bob[bold]: boom\n"  # 오류 takes 4 columns
