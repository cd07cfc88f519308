"""Where a batch's gradings run (grader.classroom.executors, grading_process): each in a grading
process of its own, timed where it runs and stopped past its budget, on this machine or on Dask.

The grading function is the fake one of conftest (``fake_grader``): it sleeps, hangs, raises or
dies on demand, so what is checked is the executors' own work.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import shutil
import signal
import time

import pytest
from conftest import ROOT, quiet_console

from grader.classroom import batch, executors, grading, grading_process
from grader.classroom.gradebook import Gradebook
from grader.engine import isolation, run, stages
from grader.engine.options import GradingOptions


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
    (it once said ``+ 90`` beside an unused SLACK_S): with the slack cut, a 20 s hang is stopped at 3 s.
    The stages' part is their limits times LOAD_FACTOR: a limit counts a worker's own time, not the wall clock."""
    chosen = stages.resolve(["a01_similarity"])
    monkeypatch.setattr(executors, "SLACK_S", 3 - executors.LOAD_FACTOR * chosen[0].time_limit_s - run.PYTEST_SLACK_S)
    monkeypatch.setenv("FAKE_HANG_S", "20")
    subs, out = _class(tmp_path / "class", ["hangs"]), tmp_path / "out"
    start, console = time.monotonic(), quiet_console()
    assert batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], target=fake_grader, console=console) == 0
    row = _grades(out)["hangs"]
    assert row["status"] == "error" and "longer than 3 s" in row["error"], row
    assert console.file.getvalue().count("retry") == grading.RETRIES  # hung, or starved: tried again later
    assert time.monotonic() - start < 15 + 3 * grading.RETRIES
    assert executors.budget_s(chosen) == (executors.LOAD_FACTOR * chosen[0].time_limit_s + run.PYTEST_SLACK_S
                                          + executors.SLACK_S)


STARVED = """
import os

import fakegrader
from grader.engine import isolation


def grade(path, submission_id, options):
    \"\"\"The fake grading, after STARVED_TIMES starved workers for a submission named starved*.\"\"\"
    mark = os.path.join(os.environ["STARVED_MARKS"], submission_id)
    tries = int(open(mark).read()) if os.path.exists(mark) else 0
    open(mark, "w").write(str(tries + 1))
    if submission_id.startswith("starved") and tries < int(os.environ["STARVED_TIMES"]):
        raise isolation.WorkerStarved("the machine's load kept the worker of a01_similarity waiting for a CPU")
    return fakegrader.grade(path, submission_id, options)
"""


@pytest.mark.parametrize("starved_times", [1, 5])
def test_a_starved_grading_goes_into_the_retry_queue_and_is_never_scored(tmp_path, fake_grader, monkeypatch,
                                                                        starved_times):
    """A starved worker is the grader's trouble: the grading is not stored but graded again after the others;
    after ``grading.RETRIES`` more tries it is an error row, never a score."""
    lib = tmp_path / "lib"
    (lib / "starved.py").write_text(STARVED)
    (tmp_path / "marks").mkdir()
    monkeypatch.setenv("STARVED_MARKS", str(tmp_path / "marks"))
    monkeypatch.setenv("STARVED_TIMES", str(starved_times))
    subs, out = _class(tmp_path / "class", ["a_ok", "starved"]), tmp_path / "out"
    subs.joinpath("a_ok").rename(subs / "z_ok")  # graded after the starved one, which is then retried after it
    console = quiet_console()
    assert batch.run_batch(subs, out=out, stage_ids=["a01_similarity"], target="starved:grade", workers=1,
                           console=console) == 0
    said, rows = console.file.getvalue(), _grades(out)
    tries = int((tmp_path / "marks" / "starved").read_text())
    book = Gradebook(f"sqlite:///{out / 'gradebook.sqlite'}")
    assert len(book.history("starved")) == 1, "a starved outcome was stored"
    if starved_times == 1:
        assert tries == 2 and rows["starved"]["status"] == "graded"
        assert said.index("graded z_ok") < said.index("graded starved"), said
    else:
        assert tries == 1 + grading.RETRIES
        assert rows["starved"]["status"] == "error" and "waiting for a CPU" in rows["starved"]["error"]
        assert rows["starved"]["total"] == "", rows["starved"]
    assert said.count("retry") == min(starved_times, grading.RETRIES) and "waiting for a CPU" in said
    assert rows["z_ok"]["status"] == "graded"


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
import ctypes
import os


def grade(path, submission_id, options):
    from grader.engine import isolation
    death = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(2, ctypes.byref(death), 0, 0, 0)  # PR_GET_PDEATHSIG
    return {"probed": isolation._probed.get("result").to_json() if "result" in isolation._probed else None,
            "blas": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
            "death_signal": death.value, "threads": options.threads}
"""


def _seen_by_a_grading_process(tmp_path, monkeypatch, threads: int = 1) -> dict:
    """What a grading process started as a batch starts it (``GradingProcess``) finds in itself."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "seen.py").write_text(SEEN)
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{lib}")
    spec = grading_process.Spec(str(tmp_path), "s", GradingOptions(stage_ids=["a01_similarity"], threads=threads),
                                target="seen:grade")
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
    seen = _seen_by_a_grading_process(tmp_path, monkeypatch, threads=threads)
    assert seen["threads"] == threads  # the options the grading is given are the ones the batch chose
    blas = seen["blas"]
    assert blas == {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": "7", "OPENBLAS_NUM_THREADS": str(threads)}


def test_a_grading_process_dies_with_its_fork_server_by_the_one_death_signal_set_at_the_fork(tmp_path, monkeypatch):
    """``PR_SET_PDEATHSIG`` is set once: by the fork server's child, at the fork (``jail.die_with_parent``: SIGKILL,
    checked against the parent's pid right after); the grading process does not set it again."""
    assert _seen_by_a_grading_process(tmp_path, monkeypatch)["death_signal"] == signal.SIGKILL


def test_grading_options_cross_to_a_grading_process_as_they_were_given():
    """The spec is JSON on the grading process's command line: every option comes back the same, and a key
    that is not an option is refused rather than dropped."""
    options = GradingOptions(kind="hidden", stage_ids=["a01_similarity", "a02_softmax"], isolation="strict",
                             allow_readable_secrets=True, hide=["/class", "/out"], threads=3, seed=12345,
                             fast_only=True, reverse_order=True, language=None, pytest_here=True, validate=False)
    spec = grading_process.Spec("/class/ann", "ann", options, target="seen:grade")
    again = grading_process.Spec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec and again.options.stage_ids == ("a01_similarity", "a02_softmax")
    with pytest.raises(ValueError, match="not grading options: timeout"):
        GradingOptions.from_json({**options.to_json(), "timeout": 3})
