"""Batch grading of a whole class: parallel, resumable, into a real gradebook.

Real gradings (numpy stages only) for the end-to-end run, the SIGKILL/resume
run, the Dask cluster and PostgreSQL; a fake grading function (a module
written here, run by the real batch machinery) for the failure modes and the
regrade rules, which do not need the real suites to be exercised.
"""
from __future__ import annotations

import copy
import csv
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, quiet_console

from grader.authoring import mutants
from grader.classroom import batch, discovery
from grader.classroom.gradebook import Gradebook
from grader.engine import report as report_mod
from grader.engine import stages

PY = sys.executable
STAGES = [s for s in ("a01_similarity", "a02_softmax")   # the numpy stages (a02 while it is being written)
          if (ROOT / "assignments" / s / "stage.toml").exists()
          and (ROOT / "tests" / "hidden" / f"test_{s}.py").exists()]
STAGE_ARG = ",".join(STAGES)


# ---------------------------------------------------------------- building a class

def _modules(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for s in STAGES:
        shutil.copy(src / f"{s}.py", dest / f"{s}.py")
    return dest


def _mutant():
    """A catalogued a01 mistake whose feedback does not depend on timings."""
    found = [m for m in mutants.load("a01_similarity") if "loop" not in m.id]
    return next((m for m in found if m.id == "scores_normalised_to_cosine"), found[0])


def _mutant_folder(dest: Path) -> Path:
    tmp = dest.parent / f".build-{dest.name}"
    mutants.build_submission(_mutant(), tmp)
    _modules(tmp, dest)
    shutil.rmtree(tmp)
    return dest


def _notebook_folder(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for s in STAGES:
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
              "cells": [{"cell_type": "code", "metadata": {"tags": ["solution"]}, "execution_count": None,
                         "outputs": [], "source": (src / f"{s}.py").read_text()}]}
        (dest / f"{s}.ipynb").write_text(json.dumps(nb))
    return dest


def _zip(src: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w") as z:
        for p in sorted(src.glob("*.py")):
            z.write(p, f"work/{p.name}")
    return dest


def small_class(folder: Path) -> Path:
    """alice: the reference (folder); bob: the stubs, but for a second stage that does not import (.zip);
    carol: a catalogued mistake (notebooks); dave: a corrupt .zip."""
    folder.mkdir(parents=True)
    _modules(ROOT / "solutions", folder / "alice")
    tmp = _modules(ROOT / "starter", folder.parent / "bob-src")
    (tmp / f"{STAGES[1]}.py").write_text("def softmax(x, axis=-1)\n    return x\n")
    _zip(tmp, folder / "bob.zip")
    mut = _mutant_folder(folder.parent / "carol-src")
    _notebook_folder(mut, folder / "carol")
    (folder / "dave.zip").write_bytes(b"PK\x03\x04 not a zip at all")
    (folder / "README.txt").write_text("not a submission\n")
    return folder


def run_cli(*args, timeout=900, env=None):
    return subprocess.run([PY, "-m", "grader", "batch", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def read_csv(path: Path) -> dict:
    with open(path, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def comparable(rep: dict) -> dict:
    """A report without its timings."""
    rep = copy.deepcopy(rep)
    rep.pop("duration_s", None)
    for s in rep["stages"]:
        for t in s["tests"]:
            t.pop("duration_s", None)
    return rep


def poll(condition, timeout: float, every: float = 0.2):
    """``condition()``'s first true value within ``timeout`` seconds, else its last value."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= end:
            return value
        time.sleep(every)


def alive(processes) -> list:
    """Those of ``processes`` still running (a zombie is dead: only its parent has not reaped it)."""
    def running(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return [p for p in processes if running(p)]


def sqlite_count(db: Path, where: str = "1=1") -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute(f"select count(*) from gradings where {where}").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:  # tables not created yet
        return 0


@pytest.fixture(scope="module")
def local_batch(tmp_path_factory):
    """The small class graded once by the local executor with 2 workers (the CLI, as an instructor runs it)."""
    assert STAGES and STAGES[0] == "a01_similarity"
    base = tmp_path_factory.mktemp("batch")
    subs, out = small_class(base / "class"), base / "out"
    suite_before = stages.suite_hash(stages.resolve(STAGES))
    proc = run_cli(subs, "--stages", STAGE_ARG, "--workers", 2, "--out", out)
    proc.suites = (suite_before, stages.suite_hash(stages.resolve(STAGES)))  # differ only if someone edits the tests
    return subs, out, proc


# ---------------------------------------------------------------- real gradings

def test_batch_grades_a_class_into_reports_csv_and_gradebook(local_batch):
    subs, out, proc = local_batch
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {p.stem: json.loads(p.read_text()) for p in (out / "reports").glob("*.json")}
    assert sorted(reports) == ["alice", "bob", "carol", "dave"]
    for rep in reports.values():
        report_mod.validate(rep)
        assert [s["id"] for s in rep["stages"]] == STAGES
    alice, bob, carol, dave = (reports[k] for k in ("alice", "bob", "carol", "dave"))
    assert alice["score"] == alice["max_score"] > 0, "the reference must score full marks"
    assert bob["score"] == 0, "the stubs must score zero"
    assert bob["submission"]["format"] == "zip" and carol["submission"]["format"] == "folder"
    a01 = next(s for s in carol["stages"] if s["id"] == "a01_similarity")
    assert 0 < a01["score"] < a01["max_score"], "the catalogued mistake must lose some points on a01"
    assert dave["score"] == 0 and "zip" in dave["errors"][0]

    grades = read_csv(out / "grades.csv")
    assert sorted(grades) == ["alice", "bob", "carol", "dave"], "one row per student, README.txt ignored"
    header = list(next(iter(grades.values())))
    assert header[:len(STAGES) + 3] == ["student", *STAGES, "total", "bonus"]
    assert float(grades["alice"]["total"]) == alice["max_score"] and grades["alice"]["status"] == "graded"
    for s in STAGES:
        assert float(grades["carol"][s]) == next(x["score"] for x in carol["stages"] if x["id"] == s)
    assert grades["dave"]["status"] == "unreadable" and "zip" in grades["dave"]["error"]
    assert grades["dave"]["total"] == "" and grades["dave"][STAGES[0]] == "", "no grade, not a silent zero"
    # a stage left as the starter's stubs is not handed in; one that does not import says so, with its error
    assert grades["bob"][f"{STAGES[0]} status"] == "not handed in"
    assert grades["bob"][f"{STAGES[1]} status"].startswith("does not import: SyntaxError: ")
    assert f"{STAGES[1]}.py does not import (SyntaxError: " in grades["bob"]["error"]
    assert grades["alice"][f"{STAGES[1]} status"] == "graded"
    assert grades["dave"][f"{STAGES[1]} status"] == "not handed in"
    # the repository's course.toml gives no Canvas export: said once, at the very end
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.stdout.count("grades-canvas.csv cannot be matched") == 1 and "[canvas] export" in last, proc.stdout

    book = Gradebook(f"sqlite:///{out / 'gradebook.sqlite'}")
    counts = book.counts()
    n_tests = sum(len(s["tests"]) for r in (alice, bob, carol) for s in r["stages"])
    assert counts["gradings"] == 4 and counts["submissions"] == 4
    assert counts["stage_results"] == 3 * len(STAGES) and counts["test_results"] == n_tests
    (run,) = book.runs()
    assert run["status"] == "finished" and run["n_graded"] == 3 and run["n_errors"] == 1
    if proc.suites[0] == proc.suites[1]:
        assert run["suite_hash"] == proc.suites[0]
    assert len(run["grader_version"]) >= 7
    assert "submissions/min" in proc.stdout and "class summary" in proc.stdout
    assert (out / "html" / "class.html").exists() and (out / "html" / "alice.html").exists()
    book.close()


def test_rerun_grades_only_what_changed_and_keeps_history(local_batch, tmp_path):
    subs, out, first = local_batch
    assert first.returncode == 0, first.stdout + first.stderr
    work = tmp_path / "out"
    shutil.copytree(out, work)              # the other tests keep the first run's outputs
    proc = run_cli(subs, "--stages", STAGE_ARG, "--workers", 2, "--out", work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    book = Gradebook(f"sqlite:///{work / 'gradebook.sqlite'}")
    assert book.counts()["gradings"] == 4, "an unchanged class is not graded again"
    assert book.runs()[-1]["n_graded"] == 0 and book.runs()[-1]["n_skipped"] == 4

    # carol fixes her mistake: only carol is graded again; her first grade stays in the history
    carol = subs.parent / "carol-fixed"
    _notebook_folder(ROOT / "solutions", carol)
    saved = subs.parent / "carol-saved"
    shutil.move(subs / "carol", saved)
    shutil.move(carol, subs / "carol")
    try:
        proc = run_cli(subs, "--stages", STAGE_ARG, "--workers", 2, "--out", work)
    finally:
        shutil.rmtree(subs / "carol")
        shutil.move(saved, subs / "carol")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert book.counts()["gradings"] == 5
    assert book.runs()[-1]["n_graded"] == 1
    history = book.history("carol")
    assert len(history) == 2 and history[0]["sha256"] != history[1]["sha256"]
    assert history[1]["score"] > history[0]["score"]
    grades = read_csv(work / "grades.csv")
    assert float(grades["carol"]["total"]) == float(grades["alice"]["total"])
    assert json.loads((work / "reports" / "carol.json").read_text())["submission"]["sha256"] == history[1]["sha256"]
    book.close()


def test_sigkill_mid_run_then_rerun_loses_and_duplicates_nothing(tmp_path):
    subs = tmp_path / "class"
    subs.mkdir()
    _modules(ROOT / "solutions", subs / "s1")
    _mutant_folder(subs / "s2")
    _zip(_modules(ROOT / "starter", tmp_path / "stub"), subs / "s3.zip")
    out = tmp_path / "out"
    db = out / "gradebook.sqlite"
    proc = subprocess.Popen([PY, "-m", "grader", "batch", str(subs), "--stages", STAGE_ARG, "--workers", "2",
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    descendants = {}

    def first_grading_recorded():
        try:
            for p in psutil.Process(proc.pid).children(recursive=True):
                descendants.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            return True
        return proc.poll() is not None or sqlite_count(db) >= 1

    poll(first_grading_recorded, 600)
    assert proc.poll() is None, "the batch finished before it could be killed; the test needs a bigger class"
    done_before = sqlite_count(db)
    assert 1 <= done_before < 3
    for p in psutil.Process(proc.pid).children(recursive=True):
        descendants.setdefault(p.pid, p)
    assert descendants, "the batch grades in child processes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # its grading processes (and their pytest sessions) die with it
    assert poll(lambda: not alive(descendants.values()), 30), \
        f"left behind after SIGKILL: {[' '.join(p.cmdline())[:100] for p in alive(descendants.values())]}"
    assert not list((out / "reports").glob(".tmp-*")), "no half-written report"

    rerun = run_cli(subs, "--stages", STAGE_ARG, "--workers", 2, "--out", out)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    book = Gradebook(f"sqlite:///{db}")
    runs = book.runs()
    assert [r["status"] for r in runs] == ["abandoned", "finished"]
    done_after_kill = sqlite_count(db, "run_id = 1")
    assert done_after_kill >= done_before
    assert runs[1]["n_graded"] == 3 - done_after_kill, "what was recorded before the kill is not redone"
    for sid in ("s1", "s2", "s3"):
        assert len(book.history(sid)) == 1, f"{sid} graded {len(book.history(sid))} times"
    assert book.counts()["gradings"] == 3
    assert sorted(p.stem for p in (out / "reports").glob("*.json")) == ["s1", "s2", "s3"]
    grades = read_csv(out / "grades.csv")
    assert len(grades) == 3 and all(r["status"] == "graded" for r in grades.values())
    s1, s3 = (json.loads((out / "reports" / f"{k}.json").read_text()) for k in ("s1", "s3"))
    assert s1["score"] == s1["max_score"] > 0 and s3["score"] == 0
    book.close()


def test_dask_cluster_gives_the_same_reports_as_local_processes(local_batch, tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    subs, out_local, first = local_batch
    assert first.returncode == 0, first.stdout + first.stderr
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    out = tmp_path / "out-dask"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster:
        proc = run_cli(subs, "--stages", STAGE_ARG, "--executor", "dask", "--scheduler", cluster.scheduler_address,
                       "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dask (" in proc.stdout
    local = {p.stem: json.loads(p.read_text()) for p in (out_local / "reports").glob("*.json")}
    remote = {p.stem: json.loads(p.read_text()) for p in (out / "reports").glob("*.json")}
    assert sorted(remote) == sorted(local) == ["alice", "bob", "carol", "dave"]
    for sid in local:
        assert comparable(remote[sid]) == comparable(local[sid]), f"{sid}: dask and local reports differ"
    assert read_csv(out / "grades.csv").keys() == read_csv(out_local / "grades.csv").keys()
    run = Gradebook(f"sqlite:///{out / 'gradebook.sqlite'}").runs()[0]
    assert run["executor"].startswith("dask") and run["n_graded"] == 3


def test_postgres_gradebook(tmp_path):
    """The same batch into a real PostgreSQL server, started with the project's own script."""
    script = ROOT / "scripts" / "setup-postgres.sh"
    base = Path(f"/tmp/gradebook-pg-{uuid.uuid4().hex[:8]}")
    started = subprocess.run(["bash", str(script), str(base)], capture_output=True, text=True, timeout=900)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().splitlines()[-1]
    assert url.startswith("postgresql+psycopg://")
    try:
        subs = tmp_path / "class"
        subs.mkdir()
        _modules(ROOT / "solutions", subs / "erin")
        (subs / "frank.zip").write_bytes(b"garbage")
        out = tmp_path / "out"
        proc = run_cli(subs, "--stages", STAGE_ARG, "--workers", 2, "--out", out, "--gradebook", url)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not (out / "gradebook.sqlite").exists()
        again = run_cli(subs, "--stages", STAGE_ARG, "--out", out, "--gradebook", url)
        assert again.returncode == 0, again.stdout + again.stderr
        regrade = run_cli(subs, "--stages", STAGE_ARG, "--out", out, "--gradebook", url, "--regrade")
        assert regrade.returncode == 0, regrade.stdout + regrade.stderr

        import sqlalchemy as sa
        engine = sa.create_engine(url)
        assert engine.dialect.name == "postgresql"
        with engine.connect() as conn:
            runs = conn.execute(sa.text("select status, n_graded, n_skipped, regrade from runs order by id")).all()
            assert [tuple(r) for r in runs] == [("finished", 1, 0, False), ("finished", 0, 2, False),
                                                ("finished", 1, 0, True)]
            rows = conn.execute(sa.text("select run_id, student, status, score, max_score from gradings "
                                        "order by run_id, student")).all()
            assert [(r.run_id, r.student, r.status) for r in rows] == [
                (1, "erin", "graded"), (1, "frank", "unreadable"), (3, "erin", "graded"), (3, "frank", "unreadable")]
            assert rows[0].score == rows[0].max_score == rows[2].score
            n_tests = conn.execute(sa.text("select count(*) from test_results t join gradings g on g.id = t.grading_id "
                                           "where g.run_id = 1")).scalar_one()
            rep = json.loads((out / "reports" / "erin.json").read_text())
            assert n_tests == sum(len(s["tests"]) for s in rep["stages"])
            failing = conn.execute(sa.text("select count(*) from test_results where status <> 'passed'")).scalar_one()
            assert failing == 0
        engine.dispose()
        assert read_csv(out / "grades.csv")["frank"]["status"] == "unreadable"
    finally:
        subprocess.run(["bash", str(script), "--stop", str(base)], capture_output=True, timeout=120)


# ---------------------------------------------------------------- failure modes, with a fake grader

def _fake_class(folder: Path, names) -> Path:
    folder.mkdir()
    for n in names:
        d = folder / n
        d.mkdir()
        shutil.copy(ROOT / "solutions" / "a01_similarity.py", d)
    return folder


def test_a_grade_that_raises_dies_or_hangs_costs_only_itself(tmp_path, fake_grader):
    subs = _fake_class(tmp_path / "class", ["ok1", "raises", "dies", "hangs", "ok2"])
    out = tmp_path / "out"
    console = quiet_console()
    start = time.monotonic()
    rc = batch.run_batch(subs, out=out, workers=2, stage_ids=["a01_similarity"], target=fake_grader,
                         timeout_s=8, console=console)
    assert rc == 0, console.file.getvalue()
    assert time.monotonic() - start < 120
    grades = read_csv(out / "grades.csv")
    assert grades["ok1"]["status"] == grades["ok2"]["status"] == "graded"
    assert float(grades["ok1"]["total"]) == 8
    assert grades["raises"]["status"] == "error" and "boom inside the grader" in grades["raises"]["error"]
    assert grades["dies"]["status"] == "error" and "killed by signal 9" in grades["dies"]["error"]
    assert grades["hangs"]["status"] == "error" and "longer than 8 s" in grades["hangs"]["error"]
    for sid in grades:
        report_mod.validate(json.loads((out / "reports" / f"{sid}.json").read_text()))
    book = Gradebook(f"sqlite:///{out / 'gradebook.sqlite'}")
    assert book.counts()["gradings"] == 5
    # a grader failure is not a grade: the next run tries those again, and only those
    shutil.rmtree(subs / "hangs")
    rc = batch.run_batch(subs, out=out, workers=2, stage_ids=["a01_similarity"], target=fake_grader,
                         timeout_s=8, console=quiet_console())
    assert rc == 0
    assert book.runs()[-1]["n_graded"] == 0 and book.runs()[-1]["n_skipped"] == 2
    assert book.counts()["gradings"] == 7
    assert [h["status"] for h in book.history("raises")] == ["error", "error"]
    assert len(book.history("ok1")) == 1
    book.close()


def test_a_changed_test_suite_or_regrade_grades_again_and_keeps_history(tmp_path, fake_grader, monkeypatch):
    subs = _fake_class(tmp_path / "class", ["p1", "p2", "p3"])
    out = tmp_path / "out"
    marker = tmp_path / "suite-part.txt"
    marker.write_text("version 1")
    monkeypatch.setattr(stages, "SHARED_GRADING_FILES", [*stages.SHARED_GRADING_FILES, marker])

    def go(**kw):
        rc = batch.run_batch(subs, out=out, workers=2, stage_ids=["a01_similarity"], target=fake_grader,
                             console=quiet_console(), **kw)
        assert rc == 0
        return book.runs()[-1]

    book = Gradebook(f"sqlite:///{tmp_path / 'gb.sqlite'}")
    url = book.url
    assert go(gradebook_url=url)["n_graded"] == 3
    assert go(gradebook_url=url)["n_graded"] == 0
    suite_1 = book.runs()[-1]["suite_hash"]
    marker.write_text("version 2: a test was fixed")       # the suite changed: everybody is graded again
    run = go(gradebook_url=url)
    assert run["n_graded"] == 3 and run["suite_hash"] != suite_1
    assert go(gradebook_url=url)["n_graded"] == 0
    assert go(gradebook_url=url, regrade=True)["n_graded"] == 3
    for sid in ("p1", "p2", "p3"):
        hist = book.history(sid)
        assert len(hist) == 3 and [h["suite_hash"] == suite_1 for h in hist] == [True, False, False]
    assert len(book.runs()) == 5
    book.close()


def test_ctrl_c_stops_cleanly_and_the_rerun_finishes(tmp_path, fake_grader):
    subs = _fake_class(tmp_path / "class", [f"q{i}" for i in range(6)])
    out = tmp_path / "out"
    code = ("import sys; from grader.classroom import batch; "
            "sys.exit(batch.run_batch(sys.argv[1], out=sys.argv[2], workers=2, "
            f"stage_ids=['a01_similarity'], target={fake_grader!r}))")
    env = {**os.environ, "FAKE_GRADE_DELAY": "3"}
    proc = subprocess.Popen([PY, "-c", code, str(subs), str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    db = out / "gradebook.sqlite"
    poll(lambda: proc.poll() is not None or sqlite_count(db) >= 2, 300)
    assert proc.poll() is None, proc.communicate()[0]
    kids = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "interrupted" in output
    assert poll(lambda: not alive(kids), 30), f"left behind after Ctrl-C: {alive(kids)}"
    book = Gradebook(f"sqlite:///{db}")
    (run,) = book.runs()
    done = run["n_graded"]
    assert run["status"] == "interrupted" and 2 <= done < 6
    assert len(read_csv(out / "grades.csv")) == 6, "the CSV lists everyone, the rest as pending"
    assert sum(r["status"] == "pending" for r in read_csv(out / "grades.csv").values()) == 6 - done

    rc = batch.run_batch(subs, out=out, workers=2, stage_ids=["a01_similarity"], target=fake_grader,
                         console=quiet_console())
    assert rc == 0
    assert book.runs()[-1]["n_graded"] == 6 - done
    assert book.counts()["gradings"] == 6
    assert all(r["status"] == "graded" for r in read_csv(out / "grades.csv").values())
    book.close()


def test_discovery_names_and_guards(tmp_path):
    subs = tmp_path / "class"
    subs.mkdir()
    for name in ("zoe", "amy", "Amy Lee", ".hidden", "__MACOSX"):
        (subs / name).mkdir()
    (subs / "zoe.zip").write_bytes(b"")
    (subs / "bo.ipynb").write_text("{}")
    (subs / "notes.pdf").write_text("")
    jobs, ignored = discovery.discover(subs)
    assert [(j.id, j.format) for j in jobs] == [("Amy Lee", "folder"), ("amy", "folder"), ("bo", "notebooks"),
                                                ("zoe", "folder"), ("zoe.zip", "zip")]
    assert [j.slug for j in jobs] == ["Amy_Lee", "amy", "bo", "zoe", "zoe.zip"]
    assert ignored == ["notes.pdf"]
    # outputs inside the submissions folder are not a submission
    (subs / "out").mkdir()
    assert "out" not in [j.id for j in discovery.discover(subs, exclude=[subs / "out"])[0]]
    # a folder that would hide the grader's own scratch space is refused (exit 2)
    assert batch.run_batch("/tmp", out=tmp_path / "o", console=quiet_console()) == 2
    assert batch.run_batch(tmp_path / "nope", out=tmp_path / "o", console=quiet_console()) == 2
