"""Where a batch's gradings run (grader.classroom.executors, grading_process): each in a grading
process of its own, timed where it runs and stopped past its budget, on this machine or on Dask.

The grading function is the fake one of conftest (``fake_grader``): it sleeps, hangs, raises or
dies on demand, so what is checked is the executors' own work.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import re
import shutil
import time

import pytest
from conftest import ROOT, quiet_console

from grader.classroom import batch, executors, grading_process
from grader.engine import isolation, run, stages


def _class(folder, names):
    folder.mkdir()
    for n in names:
        (folder / n).mkdir()
        shutil.copy(ROOT / "solutions" / "a01_similarity.py", folder / n)
    return folder


def _grades(out) -> dict:
    with open(out / "grades.csv", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_the_budget_is_the_stages_limits_and_both_slacks(tmp_path, fake_grader, monkeypatch):
    """The batch's per-submission budget is ``executors.budget_s``, its slack the named constant SLACK_S
    (it once said ``+ 90`` beside an unused SLACK_S): with the slack cut, a 20 s hang is stopped at 3 s."""
    chosen = stages.resolve(["a01_similarity"])
    monkeypatch.setattr(executors, "SLACK_S", 3 - chosen[0].time_limit_s - run.PYTEST_SLACK_S)
    monkeypatch.setenv("FAKE_HANG_S", "20")
    subs, out = _class(tmp_path / "class", ["hangs"]), tmp_path / "out"
    start = time.monotonic()
    assert batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], target=fake_grader,
                           console=quiet_console()) == 0
    row = _grades(out)["hangs"]
    assert row["status"] == "error" and "longer than 3 s" in row["error"], row
    assert time.monotonic() - start < 15
    assert executors.budget_s(chosen) == chosen[0].time_limit_s + run.PYTEST_SLACK_S + executors.SLACK_S


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                                  silence_logs=40) as cluster:
        yield cluster.scheduler_address


def _on_dask(tmp_path, target, scheduler, names, timeout_s):
    subs, out = _class(tmp_path / "class", names), tmp_path / "out"
    console = quiet_console()
    assert batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], executor="dask", scheduler=scheduler,
                           target=target, timeout_s=timeout_s, console=console) == 0
    return console.file.getvalue(), _grades(out)


def test_dask_times_each_grading_where_it_runs(tmp_path, fake_grader, monkeypatch, dask_cluster):
    """Dask gradings once recorded about 0.0 s: the clock started after the result was in."""
    monkeypatch.setenv("FAKE_GRADE_DELAY", "2")
    said, grades = _on_dask(tmp_path, fake_grader, dask_cluster, ["ok"], 60)
    seconds = float(re.search(r"graded ok: 8/8 \((\d+\.\d) s\)", said).group(1))
    assert 2 <= seconds < 30, said
    assert grades["ok"]["status"] == "graded"


def test_dask_stops_a_grading_past_its_budget(tmp_path, fake_grader, monkeypatch, dask_cluster):
    """Dask once ignored the batch's per-submission budget (``timeout_s``)."""
    monkeypatch.setenv("FAKE_HANG_S", "40")
    start = time.monotonic()
    _, grades = _on_dask(tmp_path, fake_grader, dask_cluster, ["hangs"], 4)
    assert grades["hangs"]["status"] == "error" and "longer than 4 s" in grades["hangs"]["error"], grades
    assert time.monotonic() - start < 30


SEEN = """
import os


def grade(path, submission_id, stage_ids, hide, **kw):
    from grader.engine import isolation
    return {"probed": isolation._probed.get("result").to_json() if "result" in isolation._probed else None,
            "blas": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}}
"""


def _seen_by_a_grading_process(tmp_path, monkeypatch, **spec) -> dict:
    """What a grading process started as a batch starts it (``GradingProcess``) finds in itself."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "seen.py").write_text(SEEN)
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{lib}")
    spec = {"target": "seen:grade", "path": str(tmp_path), "submission_id": "s", "stage_ids": ["a01_similarity"],
            "hide": [], **spec}
    (tmp_path / "scratch").mkdir()
    outcome = grading_process.GradingProcess(spec, "s", str(tmp_path / "scratch"), "here").finish(60)
    assert outcome.report, outcome
    return outcome.report


def test_a_grading_process_takes_the_batch_s_probe_instead_of_probing_again(tmp_path, monkeypatch):
    """A batch probes the machine once, not once per submission (0.14 s of CPU each, beside the
    session's start-up): each grading process adopts the probe of the process that started it."""
    marked = dataclasses.replace(isolation.probe(), why={"marker": "probed once, by the batch"})
    monkeypatch.setitem(isolation._probed, "result", marked)
    assert _seen_by_a_grading_process(tmp_path, monkeypatch)["probed"] == marked.to_json()


@pytest.mark.parametrize("threads", [1, 3])
def test_a_grading_process_s_numpy_gets_its_share_of_the_cores_unless_the_user_chose(tmp_path, monkeypatch, threads):
    """OpenBLAS otherwise starts a spinning thread per core when the grading imports numpy (0.07 CPU-s per
    submission), on cores the other gradings of the batch were given; a number the user set is kept."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "7")
    blas = _seen_by_a_grading_process(tmp_path, monkeypatch, threads=threads)["blas"]
    assert blas == {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": "7", "OPENBLAS_NUM_THREADS": str(threads)}
