"""No point lost to machine load (grader/engine/charging.py): an oversubscribed batch on two cores, four gradings
at once beside two busy loops, of copies of a correct implementation that is slow (it needs 40 % of its stage's
limits on an idle core). Each grading gets about a third of a core, so on the wall clock the copies overrun
their limits; charged their own time, every copy gets full marks, and a sleeper still times out. And a worker
starved below a tenth of a core: the grader's error, never the student's timeout.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from grader.engine import stages
from tests.fixtures.busy import busy_loops

STAGE = stages.resolve(["a02_softmax"])[0]
SLOW_PART = f'''

# ---- a correct but slow submission: needless work before it answers (CPU seconds, whatever the load)
import time as _time


def _spend(seconds):
    start = _time.process_time()
    while _time.process_time() - start < seconds:
        pass


_spend({0.4 * STAGE.time_limit_s})  # at import: 40 % of the stage's limit
_reference_softmax, _first_call = softmax, [True]


def softmax(x, axis=-1):
    if _first_call:
        _first_call.clear()
        _spend({0.4 * STAGE.call_timeout_s})  # 40 % of a call's limit
    return _reference_softmax(x, axis)
'''
SLEEPER = ROOT / "tests" / "hostile" / "sleeper" / "a02_softmax.py"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("taskset") or len(os.sched_getaffinity(0)) < 2,
                                 reason="needs taskset and two cores")]


def _class(folder: Path) -> Path:
    folder.mkdir()
    for i in range(1, 5):
        (folder / f"copy{i}").mkdir()
        (folder / f"copy{i}" / "a02_softmax.py").write_text((ROOT / "solutions" / "a02_softmax.py").read_text()
                                                            + SLOW_PART)
    (folder / "sleeper").mkdir()
    shutil.copy(SLEEPER, folder / "sleeper" / "a02_softmax.py")
    return folder


def test_an_oversubscribed_batch_costs_no_correct_copy_a_point(tmp_path):
    subs, out = _class(tmp_path / "class"), tmp_path / "out"
    on_two_cores = ["taskset", "-c", ",".join(map(str, sorted(os.sched_getaffinity(0))[:2]))]
    with busy_loops(2, on_two_cores):
        proc = subprocess.run([*on_two_cores, sys.executable, "-m", "grader", "batch", str(subs), "--workers", "4",
                               "--stages", STAGE.id, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                              timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "retry" not in proc.stdout, proc.stdout
    with open(out / "grades.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    for i in range(1, 5):
        rep = json.loads((out / "reports" / f"copy{i}.json").read_text())
        assert rep["score"] == rep["max_score"] == STAGE.points, f"copy{i}: {rows[f'copy{i}']}"
        first = rep["stages"][0]["tests"][0]  # it imports the module: the import's 40 % of the limit
        assert first["duration_s"] > STAGE.time_limit_s, (
            f"copy{i} was not slowed down past its limits on the wall clock ({first['duration_s']} s): the machine "
            "was not oversubscribed as the test needs")
    sleeper = json.loads((out / "reports" / "sleeper.json").read_text())["stages"][0]
    assert sleeper["score"] == 0 and {t["status"] for t in sleeper["tests"]} == {"timeout"}, sleeper


def test_a_worker_starved_past_its_backstop_is_the_grader_s_error_not_the_student_s(tmp_path):
    """One core shared with twelve busy loops: a loop in the student's code gets a thirteenth of it, less than the
    tenth its backstop waits for (grader/engine/charging.py). That is the machine's doing, not the student's
    timeout: `grade` says so on one line and exits 1, with no report (a batch would grade it again later)."""
    sub = tmp_path / "loop"
    sub.mkdir()
    shutil.copy(ROOT / "tests" / "hostile" / "infinite_loop" / "a02_softmax.py", sub)
    core = ["taskset", "-c", str(min(os.sched_getaffinity(0)))]
    with busy_loops(12, core):
        proc = subprocess.run([*core, sys.executable, "-m", "grader", "grade", str(sub), "--stages", STAGE.id,
                               "--out", str(tmp_path / "report.json")], cwd=ROOT, capture_output=True, text=True,
                              timeout=1800)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "waiting for a CPU" in said[0] and "not the student's timeout" in said[0], proc.stderr
    assert not (tmp_path / "report.json").exists()
