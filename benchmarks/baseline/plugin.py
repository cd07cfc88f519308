"""``-p benchmarks.baseline.plugin``: a ``student`` fixture that imports the stage module
into the pytest process itself, in place of ``grader.engine.plugin``'s confined worker.

    python -m pytest -p benchmarks.baseline.plugin -p pytest_jsonreport.plugin \
        -c tests/grading.ini --submission=solutions tests/hidden/test_a02_softmax.py
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.engine import paths, seeds, stages, testing
from grader.engine.errors import StudentError, StudentMissing
from grader.engine.worker_client import StudentModule
from grader.sandbox.runtime import Worker


class InProcessWorker:
    """The worker's own request handler (``grader.sandbox.runtime.Worker``), called directly."""

    def __init__(self, stage, submission_dir: str, threads: int = 1):
        if stage.library == "torch":  # as a confined worker does (runtime.main): else torch uses every core
            import torch
            torch.set_num_threads(int(threads or 1))
        self._worker = Worker({"stage": stage.id, "student_dir": submission_dir,
                               "starter_dir": None, "earlier": [], "forbidden": []})
        self.load_reply = None

    def loaded(self):
        if self.load_reply is None:
            self._worker.prepare()
            self.load_reply = self._worker.load()
        return self.load_reply

    def request(self, msg, what, timeout=None, who=None):
        load = self.loaded()
        if not load.get("ok"):
            raise (StudentMissing(load["message"]) if load.get("kind") == "missing" else StudentError(load, what))
        reply = self._worker.handle(msg)
        if reply.get("ok"):
            if who is not None and reply.get("changed"):  # as the grader's worker client does
                testing.assert_inputs_unchanged(who, {"args": msg.get("args", []), "kwargs": msg.get("kwargs", {})},
                                                reply["changed"])
            return reply["value"]
        if reply.get("kind") == "missing":
            raise StudentMissing(reply["message"])
        raise StudentError(reply, what)


def pytest_addoption(parser):
    parser.getgroup("baseline").addoption("--submission", default=str(paths.SOLUTIONS))


def _stage(item) -> str:
    return Path(item.module.__file__).stem.removeprefix("test_")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The same hidden inputs as grading the folder under its own name (the grader's plugin does this)."""
    folder = os.path.basename(os.path.abspath(item.config.getoption("--submission")))
    testing.use_stage_seed(seeds.stage_seed(seeds.submission_seed(folder), _stage(item)))


@pytest.fixture
def stage_seed(request) -> int:
    folder = os.path.basename(os.path.abspath(request.config.getoption("--submission")))
    return seeds.stage_seed(seeds.submission_seed(folder), _stage(request.node))


@pytest.fixture(scope="module")
def student(request):
    stage = stages.get(_stage(request.node))
    folder = os.path.abspath(request.config.getoption("--submission"))
    return StudentModule(InProcessWorker(stage, folder))
