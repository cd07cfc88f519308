"""Hostile submissions gain nothing and break nothing (see tests/hostile/README.md)."""
import ast
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest
from conftest import ROOT, grade_cached, stage_of
from leftovers import ipc_objects

from grader.engine import report as report_mod

HOSTILE = ROOT / "tests" / "hostile"
CASES = sorted(p.name for p in HOSTILE.iterdir() if p.is_dir())

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="strict isolation needs root (CI runs as root)"),
              pytest.mark.xdist_group("hostile")]


def submission_with(case: str, tmp_path: Path, port: int = 0, course: Path = ROOT) -> Path:
    """The attack ``case`` as a submission: its a02_softmax.py aimed at the listening ``port`` and at the
    real path of the ``course`` being graded, beside a correct a01_similarity.py."""
    sub = tmp_path / case
    sub.mkdir()
    shutil.copy(ROOT / "solutions" / "a01_similarity.py", sub)
    source = (HOSTILE / case / "a02_softmax.py").read_text()
    source = source.replace("HOSTILE_PORT = 0", f"HOSTILE_PORT = {port}")
    (sub / "a02_softmax.py").write_text(source.replace('COURSE = "/work/main"', f"COURSE = {str(course)!r}"))
    return sub


@pytest.fixture
def listener():
    """A TCP server on loopback that records whatever connects to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield received, server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("case", CASES)
def test_attack_gains_nothing_and_breaks_nothing(case, tmp_path, listener):
    received, port = listener
    before = ipc_objects()
    rep = grade_cached(submission_with(case, tmp_path, port), stages=["a01_similarity", "a02_softmax"])
    assert ipc_objects() - before == set(), f"{case} left IPC objects behind"
    report_mod.validate(rep)
    attacked, bystander = stage_of(rep, "a02_softmax"), stage_of(rep, "a01_similarity")
    assert attacked["score"] == 0, f"{case} scored {attacked['score']}: " + \
        "; ".join(t["feedback"] for t in attacked["tests"] if t["status"] == "passed")
    assert bystander["score"] == bystander["max_score"], f"{case} cost the next stage points"
    assert received == [], f"{case} reached a server on this machine: {received}"
    assert rep["isolation"]["separate_user"] and rep["isolation"]["network"] == "none"


@pytest.mark.parametrize("case", ["infinite_loop", "sleeper"])
def test_an_infinite_loop_or_a_sleep_is_reported_as_a_timeout(tmp_path, case):
    """Either is the student's timeout: the loop by its CPU time, the sleeper (no CPU time) by its wall time, which
    it did not spend waiting for a CPU (grader/engine/charging.py)."""
    rep = grade_cached(submission_with(case, tmp_path), stages=["a01_similarity", "a02_softmax"])
    statuses = {t["status"] for t in stage_of(rep, "a02_softmax")["tests"]}
    assert statuses <= {"timeout", "passed"} and "timeout" in statuses


def test_a_dying_worker_is_reported_as_crashed(tmp_path):
    rep = grade_cached(submission_with("os_exit", tmp_path), stages=["a01_similarity", "a02_softmax"])
    crashed = [t for t in stage_of(rep, "a02_softmax")["tests"] if t["status"] == "crashed"]
    assert crashed and "exited with status 0" in crashed[0]["feedback"]


REUSE_STANDIN = '''"""Hands in the course's own stand-in of this stage, if the worker holds one or can import it."""
import importlib
import sys

_name = "grader.sandbox.standins.{stage}"
_standin = sys.modules.get(_name) or importlib.import_module(_name)
{assignments}
'''


@pytest.mark.parametrize("stage", ["a05_encoder", "a07_bert_mlm", "a08_sentiment"])
def test_no_stage_can_hand_in_the_courses_stand_in_of_itself(stage, tmp_path):
    """A stand-in is a working answer to its stage (built from torch's parts): the worker of that stage
    never holds it, and the course folder it comes from is out of reach."""
    from grader.engine import paths
    source = (paths.SANDBOX / "standins" / f"{stage}.py").read_text()
    names = ast.literal_eval(source.split("CONTRACT_NAMES = ", 1)[1].split("\n", 1)[0])
    sub = tmp_path / "reuse"
    sub.mkdir()
    (sub / f"{stage}.py").write_text(REUSE_STANDIN.format(
        stage=stage, assignments="\n".join(f"{n} = _standin.{n}" for n in names)))
    rep = grade_cached(sub, stages=[stage])
    graded = stage_of(rep, stage)
    assert graded["score"] == 0, [t["name"] for t in graded["tests"] if t["status"] == "passed"]
    # refused at the import (the worker's guard: the grader's modules are not the submission's to import), and
    # beneath it out of reach (the worker's root holds no stand-in of its own stage: test_isolation.py)
    assert any("uses the module grader" in t["feedback"] or "could not import the module" in t["feedback"]
               for t in graded["tests"])
