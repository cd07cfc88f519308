"""The fork server that starts workers: return codes, restarts, and its own failure."""
import os

import pytest
from conftest import ROOT

from grader.engine import forkservers, isolation, stages
from grader.engine.errors import WorkerCrashed
from grader.engine.worker_client import StageWorker, StudentModule


@pytest.fixture
def server():
    srv = forkservers.ForkServer("numpy", isolation.base_env(1))
    yield srv
    srv.close()


def _worker(server, tmp_path, source):
    stage = stages.get("a02_softmax")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "a02_softmax.py").write_text(source)
    work = tmp_path / "work"
    work.mkdir()
    iso = isolation.Isolation.choose("strict" if os.geteuid() == 0 else "degraded").for_stage(stage)
    return StageWorker(stage, str(sub), iso, server, str(work), budget_s=60)


def test_each_worker_is_a_new_fork_and_a_crash_leaves_the_server_serving(server, tmp_path):
    source = (ROOT / "solutions" / "a02_softmax.py").read_text() + (
        "\n\ndef die(code):\n    import os\n    os._exit(code)\n\n\n"
        "def pid():\n    import os\n    return os.getpid()\n")
    worker = _worker(server, tmp_path, source)
    student = StudentModule(worker)
    try:
        first = student.pid()
        with pytest.raises(WorkerCrashed, match="exited with status 3"):
            student.die(3)
        second = student.pid()  # a fresh fork of the same server
        assert second != first and second != server.proc.pid
        assert abs(student.softmax([0.0, 0.0])[0] - 0.5) < 1e-12
    finally:
        worker.close()
    assert worker.pid is None and server.proc.poll() is None


def test_a_dead_fork_server_fails_only_the_stage_it_serves_with_a_reason(server, tmp_path):
    server.proc.kill()
    server.proc.wait()
    worker = _worker(server, tmp_path, (ROOT / "solutions" / "a02_softmax.py").read_text())
    with pytest.raises(WorkerCrashed, match="numpy fork server failed"):
        StudentModule(worker).softmax([0.0])
    assert worker.crashes == 1 and worker.events


def test_a_fork_server_dying_under_a_running_worker_costs_that_stage_only(server, tmp_path):
    worker = _worker(server, tmp_path, (ROOT / "solutions" / "a02_softmax.py").read_text())
    student = StudentModule(worker)
    assert abs(student.softmax([0.0, 0.0])[0] - 0.5) < 1e-12
    server.proc.kill()
    server.proc.wait()
    worker.close()  # no exception: the worker is killed directly
    assert worker.pid is None
    with pytest.raises(WorkerCrashed, match="fork server failed"):
        student.softmax([0.0])


def test_a_librarys_server_stops_after_the_last_stage_that_needs_it():
    """The numpy server is not kept through the torch stages (its memory is given back)."""
    from types import SimpleNamespace

    from grader.engine import plugin

    def item(stage_id):
        return SimpleNamespace(module=SimpleNamespace(__file__=f"/x/tests/hidden/test_{stage_id}.py"))

    for reverse in (False, True):  # stages always run in course order; --reverse-order reverses within each
        config = SimpleNamespace(getoption=lambda name, r=reverse: r)
        items = [item(s) for s in ("a05_encoder", "a09_retrieval", "a01_similarity", "a04_positional")]
        plugin.pytest_collection_modifyitems(config, items)
        order = [plugin.stage_of(i.module) for i in items]
        assert order == ["a01_similarity", "a04_positional", "a05_encoder", "a09_retrieval"]
        assert config._grader_last_of_library == {"numpy": "a04_positional", "torch": "a09_retrieval"}
    srv = forkservers.get("numpy", 1)
    forkservers.close("numpy", 1)
    assert srv.proc.poll() is not None and ("numpy", 1) not in forkservers._servers
    forkservers.close("numpy", 1)  # closing twice is harmless
