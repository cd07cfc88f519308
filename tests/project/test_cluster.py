"""A batch on a Dask cluster of separate processes whose workers cannot see the class folder
(grader.classroom.executors, parcel): ``dask scheduler`` and ``dask worker`` started as commands, the
workers in a mount namespace of their own where the folder holding the class and the outputs is an empty
tmpfs, as on another machine (``tests/fixtures/dask_cluster.py``). Each task carries its submission; only the batch
reads the class folder and writes the outputs.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import psutil
import pytest
from conftest import FAKE_GRADER, ROOT, quiet_console

from grader.authoring import mutants
from grader.classroom import batch
from grader.classroom.gradebook import Gradebook
from tests.fixtures.dask_cluster import cluster

STAGES = ["a01_similarity", "a02_softmax"]

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                 reason="a mount namespace per worker needs root and unshare"),
              pytest.mark.xdist_group("dask-cluster")]


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    """The fake grading function of conftest, where the workers can import it."""
    lib = tmp_path_factory.mktemp("lib")
    (lib / "fakegrader.py").write_text(FAKE_GRADER)
    return lib


@pytest.fixture(scope="module")
def side(tmp_path_factory) -> Path:
    """The batch's side: the class folders and the outputs; an empty tmpfs for the workers."""
    return tmp_path_factory.mktemp("batch-side")


@pytest.fixture(scope="module")
def remote(side, lib, tmp_path_factory):
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{lib}", "FAKE_GRADE_DELAY": "5"}  # the delay: fake gradings only
    with cluster(tmp_path_factory.mktemp("cluster-logs"), nworkers=2, hidden=side, env=env) as (address, workers):
        yield address, workers


def _copy(stage_files: dict, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name, src in stage_files.items():
        shutil.copy(src, dest / f"{name}.py")
    return dest


def _class(folder: Path) -> Path:
    """alice: the reference (a folder); bob: correct alternatives (a zip, in a nested folder); carol: a
    catalogued a02 mistake (notebooks); dave: a zip that is not one."""
    folder.mkdir()
    _copy({s: ROOT / "solutions" / f"{s}.py" for s in STAGES}, folder / "alice")
    alt = _copy({s: sorted((ROOT / "tests" / "alternatives" / s).glob("*.py"))[0] for s in STAGES},
                folder.parent / "bob-src")
    with zipfile.ZipFile(folder / "bob.zip", "w") as z:
        for p in sorted(alt.glob("*.py")):
            z.write(p, f"bob-work/{p.name}")
    mistake = next(m for m in mutants.load("a02_softmax") if "loop" not in m.id)
    built = folder.parent / "carol-src"
    mutants.build_submission(mistake, built)
    (folder / "carol").mkdir()
    for s in STAGES:
        cell = {"cell_type": "code", "metadata": {"tags": ["solution"]}, "execution_count": None, "outputs": [],
                "source": (built / f"{s}.py").read_text()}
        (folder / "carol" / f"{s}.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5,
                                                                 "metadata": {}, "cells": [cell]}))
    (folder / "dave.zip").write_bytes(b"PK\x03\x04 not a zip at all")
    return folder


def _batch(subs: Path, out: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "batch", str(subs), "--stages", ",".join(STAGES),
                           "--out", str(out), *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def _reports(out: Path) -> dict:
    return {p.stem: json.loads(p.read_text()) for p in (out / "reports").glob("*.json")}


def _without_timings(rep: dict) -> dict:
    rep = json.loads(json.dumps(rep))
    rep.pop("duration_s", None)
    for s in rep["stages"]:
        for t in s["tests"]:
            t.pop("duration_s", None)
    return rep


def test_workers_that_cannot_see_the_class_grade_it_as_this_machine_does(remote, side):
    address, _ = remote
    subs = _class(side / "class")
    from distributed import Client
    with Client(address, timeout="30s") as client:
        assert set(client.run(os.path.exists, str(subs)).values()) == {False}, "a worker sees the class folder"
        assert set(client.run(os.path.exists, str(ROOT / "solutions")).values()) == {True}

    proc = _batch(subs, side / "out", "--executor", "dask", "--scheduler", address)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for sid in ("alice", "bob", "carol"):
        assert f"graded {sid}:" in proc.stdout, proc.stdout  # progress: a line per submission as it comes
    assert "unreadable dave:" in proc.stdout
    remote_reports = _reports(side / "out")
    assert sorted(remote_reports) == ["alice", "bob", "carol", "dave"]
    alice, bob, carol, dave = (remote_reports[s] for s in ("alice", "bob", "carol", "dave"))
    assert alice["score"] == alice["max_score"] == bob["score"] > 0
    assert 0 < carol["score"] < carol["max_score"]
    assert dave["score"] == 0 and "not a readable zip" in dave["errors"][0]
    assert bob["submission"] == {**bob["submission"], "path": str(subs / "bob.zip"), "format": "zip"}

    # the same class on this machine gives the same reports
    local = _batch(subs, side / "out-local", "--workers", 2)
    assert local.returncode == 0, local.stdout + local.stderr
    local_reports = _reports(side / "out-local")
    for sid, rep in local_reports.items():
        assert _without_timings(remote_reports[sid]) == _without_timings(rep), f"{sid}: dask and local differ"

    again = _batch(subs, side / "out", "--executor", "dask", "--scheduler", address)
    assert again.returncode == 0 and "graded now 0, already graded 4" in again.stdout, again.stdout
    runs = Gradebook(f"sqlite:///{side / 'out' / 'gradebook.sqlite'}").runs()
    assert [r["n_graded"] for r in runs] == [3, 0] and runs[0]["executor"].startswith("dask")


def _grading(workers: subprocess.Popen) -> list:
    """The Dask worker processes with a grading under them (a child of the fork server the worker keeps)."""
    return [p for p in psutil.Process(workers.pid).children() if any(c.children() for c in p.children())]


def test_a_worker_lost_mid_grading_is_retried_and_errors_keep_their_rows(remote, side):
    """Kill a worker process while it grades: Dask gives the task to another worker; a grading that fails
    still comes back as its own row."""
    address, workers = remote
    subs = side / "class-lost"
    subs.mkdir()
    for name in ("s1", "s2", "raises"):
        _copy({"a01_similarity": ROOT / "solutions" / "a01_similarity.py"}, subs / name)
    out = side / "out-lost"
    killed = []

    def kill_a_busy_worker():
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            busy = _grading(workers)
            if busy:
                busy[0].kill()
                killed.append(busy[0].pid)
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_busy_worker)
    killer.start()
    code = batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], executor="dask", scheduler=address,
                           target="fakegrader:grade", console=quiet_console())
    killer.join()
    assert killed, "no grading was seen on the cluster"
    assert code == 0
    with open(out / "grades.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert rows["s1"]["status"] == rows["s2"]["status"] == "graded", rows
    assert rows["raises"]["status"] == "error" and "boom inside the grader" in rows["raises"]["error"]
    book = Gradebook(f"sqlite:///{out / 'gradebook.sqlite'}")
    assert [len(book.history(s)) for s in ("s1", "s2")] == [1, 1]


def test_a_worker_with_another_test_suite_refuses(side, lib, tmp_path):
    """A worker whose course differs from the batch's (here one hidden test changed) grades nothing."""
    suite = ROOT / "tests" / "hidden" / "test_a01_similarity.py"
    changed = tmp_path / "test_a01_similarity.py"
    changed.write_text(suite.read_text() + "\n# changed on this worker\n")
    env = {"PYTHONPATH": f"{ROOT}{os.pathsep}{lib}"}
    subs = side / "class-other-suite"
    _copy({"a01_similarity": ROOT / "solutions" / "a01_similarity.py"}, subs / "s1")
    with cluster(tmp_path / "logs", nworkers=1, hidden=side, env=env, binds={changed: suite}) as (address, _):
        assert batch.run_batch(subs, out=side / "out-other-suite", stage_ids=["a01_similarity"], executor="dask",
                               scheduler=address, target="fakegrader:grade", console=quiet_console()) == 0
    with open(side / "out-other-suite" / "grades.csv") as f:
        row = next(csv.DictReader(f))
    assert row["status"] == "error" and "differs from the batch's" in row["error"], row
