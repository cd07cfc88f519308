"""Collecting a class's git clones at the deadline, then grading what was collected, with lateness.

Real git repositories: a remote per student, the student's pushes (commit dates set by the
student, some backdated), and the instructor's clones and pulls at set times (git writes the
reflog with GIT_COMMITTER_DATE, so the tests choose when the instructor's clone saw what).
The batch runs on what ``collect`` wrote, with the fake grading function for the outputs and
once with the real suites.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, quiet_console

from grader.classroom import batch, canvas, collect, term
from grader.classroom.gradebook import Gradebook, default_url

SEOUL = dt.timezone(dt.timedelta(hours=9))
DUE = dt.datetime(2027, 3, 12, 23, 59, tzinfo=SEOUL)          # a01's deadline in the course.toml below
DUE2 = DUE + dt.timedelta(weeks=1)                             # a02's
PREFIX = "transformer-course-"
STAGES = ["a01_similarity", "a02_softmax"]


def course_toml(folder: Path, canvas: str = "", late_changes: str = "count") -> Path:
    path = folder / "course.toml"
    path.write_text(textwrap.dedent(f"""
        [classroom]
        repo_prefix = "{PREFIX}"
        [late]
        timezone = "Asia/Seoul"
        deadline = "2027-06-18 23:59"
        grace_minutes = 15
        late_days = 1
        penalty_per_day = 0.25
        cutoff_days = 5
        late_changes = "{late_changes}"
        [late.deadlines]
        a01_similarity = "2027-03-12 23:59"
        a02_softmax = "2027-03-19 23:59"
        """) + textwrap.dedent(canvas))
    return path


def git(cwd: Path, *args, when: dt.datetime | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "someone", "GIT_AUTHOR_EMAIL": "someone@example.invalid",
           "GIT_COMMITTER_NAME": "someone", "GIT_COMMITTER_EMAIL": "someone@example.invalid"}
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when.isoformat()
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class Student:
    """A student's repository made from the template: a bare remote and the student's working copy."""

    def __init__(self, base: Path, name: str):
        self.name, self.remote, self.work = name, base / "remotes" / f"{name}.git", base / "work" / name
        git(base, "init", "-q", "--bare", "-b", "main", str(self.remote))
        git(base, "clone", "-q", str(self.remote), str(self.work))
        (self.work / "starter").mkdir()
        for sid in STAGES:
            self.write(sid, (ROOT / "starter" / f"{sid}.py").read_text())
        self.push("template", DUE - dt.timedelta(days=10))

    def write(self, sid: str, text: str) -> None:
        (self.work / "starter" / f"{sid}.py").write_text(text)

    def solve(self, sid: str) -> None:
        self.write(sid, (ROOT / "solutions" / f"{sid}.py").read_text())

    def push(self, message: str, commit_date: dt.datetime) -> None:
        """Commit with a date the student chose (it may lie), then push."""
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message, when=commit_date)
        git(self.work, "push", "-q", "origin", "HEAD:main")


class Instructor:
    """The instructor's folder of clones (gh classroom clone student-repos), cloned and pulled at set times."""

    def __init__(self, base: Path):
        self.repos = base / "clones"
        self.repos.mkdir()

    def clone(self, s: Student, when: dt.datetime) -> None:
        git(self.repos, "clone", "-q", str(s.remote), PREFIX + s.name, when=when)

    def pull(self, s: Student, when: dt.datetime) -> None:
        git(self.repos / (PREFIX + s.name), "pull", "-q", "--ff-only", when=when)


def run_collect(instructor, out, course, when, **kw):
    lines = []
    rc = collect.run_collect(instructor.repos, out=out, course=course, when=when, say=lines.append, **kw)
    return rc, "\n".join(lines)


def firsts(out: Path, student: str) -> dict:
    book = Gradebook(default_url(str(out)))
    try:
        return {sid: rows[-1] for sid, rows in book.observations(student).items()}
    finally:
        book.close()


@pytest.fixture
def term_class(tmp_path):
    """ann solved stage 1 before the deadline; the instructor cloned just before it and collected the
    next morning. bob pushed stage 1 a day late with a commit backdated to before the deadline."""
    ann, bob = Student(tmp_path, "ann"), Student(tmp_path, "bob")
    ann.solve("a01_similarity")
    ann.push("stage 1", DUE - dt.timedelta(hours=3))
    teacher = Instructor(tmp_path)
    for s in (ann, bob):
        teacher.clone(s, DUE - dt.timedelta(minutes=30))
    out, course = tmp_path / "out", course_toml(tmp_path)
    rc, said = run_collect(teacher, out, course, when=DUE + dt.timedelta(hours=9))
    assert rc == 0, said
    bob.solve("a01_similarity")
    bob.push("stage 1 (honest, promise)", DUE - dt.timedelta(days=2))       # the commit date lies
    teacher.pull(bob, DUE + dt.timedelta(days=1, hours=1))
    rc, said = run_collect(teacher, out, course, when=DUE + dt.timedelta(days=1, hours=2))
    assert rc == 0, said
    return {"ann": ann, "bob": bob, "teacher": teacher, "out": out, "course": course, "said": said,
            "base": tmp_path}


def test_collect_records_head_and_first_seen_from_the_instructors_clone_not_commit_dates(term_class):
    out = term_class["out"]
    ann, bob = firsts(out, "ann"), firsts(out, "bob")
    assert set(ann) == set(bob) == set(STAGES), "ids are the clone names without the prefix"
    head = git(term_class["teacher"].repos / f"{PREFIX}bob", "rev-parse", "HEAD").strip()
    assert bob["a01_similarity"]["commit_id"] == head and bob["a01_similarity"]["path"] == "starter/a01_similarity.py"
    # ann's clone held her work 30 minutes before the deadline (its reflog), though collected 9 hours after
    assert ann["a01_similarity"]["first_seen"] == DUE - dt.timedelta(minutes=30)
    assert ann["a01_similarity"]["seen_via"] == "reflog"
    # bob's backdated commit reached the clone with the pull, a day and an hour after the deadline
    assert bob["a01_similarity"]["first_seen"] == DUE + dt.timedelta(days=1, hours=1)
    # his untouched stage 2 keeps the time it was first seen
    assert bob["a02_softmax"]["first_seen"] == DUE - dt.timedelta(minutes=30)
    snap = out / "collected"
    assert sorted(p.name for p in snap.iterdir()) == ["ann", "bob"]
    assert (snap / "bob" / "a01_similarity.py").read_text() == (ROOT / "solutions" / "a01_similarity.py").read_text()
    assert "first seen now: a01_similarity" not in term_class["said"], "bob's file was seen at the pull, not now"


def test_a_later_collect_keeps_first_seen_and_sees_new_commits_as_late(term_class):
    out, teacher, ann = term_class["out"], term_class["teacher"], term_class["ann"]
    rc, _ = run_collect(teacher, out, term_class["course"], when=DUE + dt.timedelta(days=2))
    assert rc == 0
    assert firsts(out, "ann")["a01_similarity"]["first_seen"] == DUE - dt.timedelta(minutes=30)
    # a change pushed after the deadline, pulled and collected at once: first seen at the collection
    ann.write("a02_softmax", (ROOT / "solutions" / "a02_softmax.py").read_text())
    ann.push("stage 2", DUE - dt.timedelta(days=5))
    teacher.pull(ann, DUE + dt.timedelta(days=3))
    when = DUE + dt.timedelta(days=3, minutes=5)
    rc, said = run_collect(teacher, out, term_class["course"], when=when)
    assert firsts(out, "ann")["a02_softmax"]["first_seen"] == DUE + dt.timedelta(days=3)
    book = Gradebook(default_url(str(out)))
    try:
        assert len(book.observations("ann")["a01_similarity"]) == 4, "one row per collection"
    finally:
        book.close()


def test_pull_first_fetches_new_work_and_a_failed_pull_costs_only_its_clone(term_class, monkeypatch):
    out, teacher, ann, bob = term_class["out"], term_class["teacher"], term_class["ann"], term_class["bob"]
    ann.solve("a02_softmax")
    ann.push("stage 2", DUE2 - dt.timedelta(days=1))
    bob.remote.rename(bob.remote.with_suffix(".gone"))           # bob deleted his repository
    pulled_at = DUE2 + dt.timedelta(hours=2)
    monkeypatch.setenv("GIT_COMMITTER_DATE", pulled_at.isoformat())   # the instructor's git writes the reflog
    rc, said = run_collect(teacher, out, term_class["course"], when=pulled_at, pull_first=True)
    assert rc == 0
    assert firsts(out, "ann")["a02_softmax"]["first_seen"] == pulled_at
    assert f"not pulled {PREFIX}bob: git pull failed" in said and "collected bob:" in said


def test_work_first_seen_after_the_cut_off_is_left_out_and_on_time_work_kept(term_class):
    out, teacher, ann = term_class["out"], term_class["teacher"], term_class["ann"]
    ann.write("a01_similarity", "# I rewrote everything, a week late\n")
    ann.push("rewrite", DUE)
    teacher.pull(ann, DUE + dt.timedelta(days=6))
    rc, _ = run_collect(teacher, out, term_class["course"], when=DUE + dt.timedelta(days=6))
    assert rc == 0
    kept = (out / "collected" / "ann" / "a01_similarity.py").read_text()
    assert kept == (ROOT / "solutions" / "a01_similarity.py").read_text(), "the version before the cut-off counts"


def test_late_changes_ignore_keeps_what_was_handed_in_on_time(term_class):
    out, teacher, ann = term_class["out"], term_class["teacher"], term_class["ann"]
    course = course_toml(term_class["base"], late_changes="ignore")
    ann.write("a01_similarity", (ROOT / "solutions" / "a01_similarity.py").read_text() + "\n# tidied later\n")
    ann.push("tidy", DUE + dt.timedelta(days=2))
    teacher.pull(ann, DUE + dt.timedelta(days=2))
    rc, _ = run_collect(teacher, out, course, when=DUE + dt.timedelta(days=2))
    assert rc == 0
    assert "tidied later" not in (out / "collected" / "ann" / "a01_similarity.py").read_text()
    # bob's first work on stage 1 came late: with only the starter on time, the late work counts
    assert (out / "collected" / "bob" / "a01_similarity.py").read_text().startswith(
        (ROOT / "solutions" / "a01_similarity.py").read_text()[:200])


def test_hostile_and_broken_clones_cost_only_themselves(tmp_path):
    """A clone's config asks git to run a program (fsmonitor), its hooks too; a stage file is a symbolic
    link; another is 3 MB; one clone is corrupt; one folder is not a clone: the rest is collected and
    nothing the clones ask for runs."""
    good, evil, huge, broken = (Student(tmp_path, n) for n in ("good", "evil", "huge", "broken"))
    pwned = tmp_path / "PWNED"
    (evil.work / "starter" / "a02_softmax.py").unlink()
    os.symlink("/etc/passwd", evil.work / "starter" / "a02_softmax.py")
    evil.push("link", DUE)
    huge.write("a01_similarity", "x = 1\n" * 600_000)
    huge.push("huge", DUE)
    teacher = Instructor(tmp_path)
    for s in (good, evil, huge, broken):
        teacher.clone(s, DUE - dt.timedelta(hours=1))
    clone = teacher.repos / f"{PREFIX}evil"
    with open(clone / ".git" / "config", "a") as f:
        f.write(f'[core]\n\tfsmonitor = "touch {pwned}"\n\tpager = "touch {pwned}"\n')
    for hook in ("post-checkout", "post-merge", "reference-transaction", "pre-auto-gc"):
        (clone / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {pwned}\n")
        (clone / ".git" / "hooks" / hook).chmod(0o755)
    for obj in (teacher.repos / f"{PREFIX}broken" / ".git" / "objects").rglob("*"):
        if obj.is_file():
            obj.chmod(0o644)
            obj.write_bytes(b"garbage")
    (teacher.repos / "notes-from-the-lms").mkdir()
    rc, said = run_collect(teacher, tmp_path / "out", course_toml(tmp_path), when=DUE)
    assert rc == 0
    assert not pwned.exists(), "collect ran something the clone asked for"
    assert "collected good:" in said and "collected evil:" in said
    assert "collected huge:" in said and "starter/a01_similarity.py is larger than 2 MB; not collected" in said
    assert "unreadable transformer-course-broken:" in said
    assert "ignored notes-from-the-lms: not a git clone" in said
    evil_snap = tmp_path / "out" / "collected" / "evil"
    assert (evil_snap / "a01_similarity.py").exists() and not (evil_snap / "a02_softmax.py").exists()
    huge_snap = tmp_path / "out" / "collected" / "huge"
    assert (huge_snap / "a02_softmax.py").exists() and not (huge_snap / "a01_similarity.py").exists()
    assert not (tmp_path / "out" / "collected" / "broken").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the clones to another user needs root")
def test_clones_owned_by_another_user_are_read(tmp_path):
    """A TA's clones collected by the instructor: plain git refuses them ("dubious ownership")."""
    ann = Student(tmp_path, "ann")
    teacher = Instructor(tmp_path)
    teacher.clone(ann, DUE - dt.timedelta(hours=1))
    for p in [teacher.repos, *teacher.repos.rglob("*")]:
        os.lchown(p, 65534, 65534)
    rc, said = run_collect(teacher, tmp_path / "out", course_toml(tmp_path), when=DUE)
    assert rc == 0 and "collected ann:" in said, said
    assert (tmp_path / "out" / "collected" / "ann" / "a01_similarity.py").is_file()


def test_without_git_collect_is_a_grader_error(tmp_path):
    (tmp_path / "clones").mkdir()
    env = {"PATH": str(tmp_path / "empty-bin"), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "grader", "collect", str(tmp_path / "clones"),
                           "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "git is not installed" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "grader", "collect", str(tmp_path / "nowhere")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "is not a folder of git clones" in proc.stderr


CANVAS = """
    [canvas]
    export = "canvas-export.csv"
    match_column = "SIS Login ID"
    roster = "roster.csv"
    total_column = "Transformer course (4242)"
    stage_columns = true
    """


def test_batch_grades_what_was_collected_with_lateness_in_reports_csv_canvas_and_pages(term_class, fake_grader):
    base, out = term_class["base"], term_class["out"]
    (base / "canvas-export.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (111)\n"
        "    Points Possible,,,,,10\n"
        '"Lee, Ann",1001,S1001,ann@uni.example,Section A,9\n'
        '"Park, Bo",1002,S1002,bo@uni.example,Section B,7\n')
    (base / "roster.csv").write_text(               # Classroom 50's roster: GitHub user name -> e-mail
        "username,first_name,last_name,email,section,github_id,role\n"
        "ann,Ann,Lee,ann@uni.example,A,11,student\nbob,Bo,Park,bo@uni.example,B,12,student\n")
    course = course_toml(base, canvas=CANVAS)
    rc = batch.run_batch(out / "collected", out=out, workers=2, stage_ids=STAGES, target=fake_grader,
                         console=quiet_console(), course=course)
    assert rc == 0
    ann = json.loads((out / "reports" / "ann.json").read_text())
    bob = json.loads((out / "reports" / "bob.json").read_text())
    assert ann["late"]["days_late"] == 0 and ann["late"]["score_after"] == ann["score"]
    a01 = next(s for s in bob["late"]["stages"] if s["id"] == "a01_similarity")
    assert a01["submitted_at"] == (DUE + dt.timedelta(days=1, hours=1)).isoformat()
    assert a01["seen_via"] == "reflog" and a01["days_late"] == 2 and a01["status"] == "late"
    # one late day in the budget, the second day costs 25 % of the stage
    assert bob["late"]["days_charged"] == 1 and a01["days_penalised"] == 1
    assert a01["score_after"] == pytest.approx(0.75 * a01["score_before"])
    assert bob["late"]["score_after"] == pytest.approx(bob["score"] - 0.25 * a01["score_before"])

    with open(out / "grades.csv", newline="") as f:
        grades = {r["student"]: r for r in csv.DictReader(f)}
    assert grades["bob"]["days_late"] == "2" and grades["bob"]["days_charged"] == "1"
    assert float(grades["bob"]["late_penalty"]) == pytest.approx(0.25 * a01["score_before"])
    assert float(grades["bob"]["final_total"]) == pytest.approx(bob["late"]["score_after"])
    assert float(grades["ann"]["final_total"]) == ann["score"] and grades["ann"]["late_penalty"] == "0"

    with open(out / "grades-canvas.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "a01_similarity: Similarity: dot product, score matrix, cosine",
                       "a02_softmax: Numerically stable softmax", "Transformer course (4242)"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "8", "8", "16"]
    by_login = {r[3]: r for r in rows[2:]}
    assert by_login["bo@uni.example"][:5] == ["Park, Bo", "1002", "S1002", "bo@uni.example", "Section B"]
    assert float(by_login["bo@uni.example"][5]) == pytest.approx(a01["score_after"])
    assert float(by_login["bo@uni.example"][-1]) == pytest.approx(bob["late"]["score_after"])

    page = (out / "html" / "bob.html").read_text()
    assert 'id="late-table"' in page and 'data-status="late"' in page and "Grade after the late policy" in page
    assert "late-penalty" in (out / "html" / "class.html").read_text()


def test_canvas_identities_through_either_roster_and_a_roster_it_cannot_read(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n    Points Possible,,,,\n"
                      '"Lee, Ann",1001,S1001,ann@uni.example,A\n')
    roster = tmp_path / "classroom_roster.csv"      # GitHub Classroom's layout
    roster.write_text('"identifier","github_username","github_id","name"\n"ann@uni.example","ann","11","Ann Lee"\n')
    settings = term.CanvasSettings(export=export, match_column="SIS Login ID", roster=roster)
    assert canvas.identities(settings) == {"ann": {"Student": "Lee, Ann", "ID": "1001", "SIS User ID": "S1001",
                                                    "SIS Login ID": "ann@uni.example", "Section": "A"}}
    roster.write_text("who,mail\nann,ann@uni.example\n")
    with pytest.raises(term.TermError, match="neither github_username,identifier nor username,email"):
        canvas.identities(settings)


def test_an_lms_export_with_a_manifest_and_a_broken_manifest(tmp_path, fake_grader):
    subs = tmp_path / "export"
    for name in ("ann", "bob"):
        (subs / name).mkdir(parents=True)
        for sid in STAGES:
            (subs / name / f"{sid}.py").write_text((ROOT / "solutions" / f"{sid}.py").read_text())
    manifest = tmp_path / "times.csv"
    manifest.write_text("student,submitted_at\nann,2027-03-12 23:00\nbob,2027-03-14 08:00\nzed,2027-03-12 20:00\n")
    course, out, console = course_toml(tmp_path), tmp_path / "out", quiet_console()
    assert batch.run_batch(subs, out=out, stage_ids=STAGES, target=fake_grader, console=console, course=course,
                           manifest=manifest) == 0
    bob = json.loads((out / "reports" / "bob.json").read_text())
    assert [s["seen_via"] for s in bob["late"]["stages"]] == ["manifest", "manifest"]
    # 2 days late on stage 1 (1 from the budget, 1 at 25 %); stage 2 was due a week later: on time
    assert [d["days_late"] for d in bob["late"]["deadlines"]] == [2, 0] and bob["late"]["days_charged"] == 1
    assert "zed has a submission time but no submission here" in console.file.getvalue()
    manifest.write_text("student,submitted_at\nann,around noon\n")
    err = io.StringIO()
    sys_stderr, sys.stderr = sys.stderr, err
    try:
        assert batch.run_batch(subs, out=tmp_path / "out2", stage_ids=STAGES, target=fake_grader,
                               console=quiet_console(), course=course, manifest=manifest) == 2
    finally:
        sys.stderr = sys_stderr
    assert "line 2" in err.getvalue() and err.getvalue().count("\n") == 1


def test_collect_then_batch_grades_the_collected_commit_with_the_real_suites(term_class):
    """End to end as an instructor runs it: collect, then `python -m grader batch OUT/collected`."""
    out = term_class["out"]
    ann = term_class["ann"]
    ann.write("a01_similarity", "raise SystemExit('pushed after collecting: must not be graded')\n")
    ann.push("oops", DUE + dt.timedelta(days=1))        # pushed, not pulled nor collected
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(out / "collected"), "--out", str(out),
                           "--stages", "a01_similarity", "--workers", "2", "--course", str(term_class["course"])],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "grades.csv", newline="") as f:
        grades = {r["student"]: r for r in csv.DictReader(f)}
    assert float(grades["ann"]["a01_similarity"]) == 8 and float(grades["ann"]["final_total"]) == 8
    assert float(grades["bob"]["a01_similarity"]) == 8 and float(grades["bob"]["final_total"]) == 6
    assert grades["bob"]["days_late"] == "2" and grades["bob"]["days_charged"] == "1"
