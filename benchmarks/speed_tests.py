"""How far the speed tests of stages 1 and 3 are from a wrong verdict, under the machine's present load.

    python -m benchmarks.speed_tests                 # 8 workers each for the reference and the loop, both stages
    python -m benchmarks.speed_tests --busy 3        # with 3 busy loops beside (a loaded machine)
    python -m benchmarks.speed_tests --trials 20

A speed test (``testing.cpu_slowdown``) takes a student's best CPU time for a call, less what receiving and
returning the data cost in the control worker, and allows ``limit`` times the reference plus that cost once
more. This runs the hidden tests' own measurement, in a fresh confined worker per trial as a grading does, on
the reference and on the catalogue's Python loop (stage 1: ``matrix_python_loop_over_rows``; stage 3, extended
catalogue: ``python_loop_over_query_rows``), and prints each one's time as a share of what it is allowed: the
reference must stay well under 1 and the loop well over it, whatever the load.
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader.authoring import mutants
from grader.engine import forkservers, isolation, paths, stages, testing
from grader.engine.worker_client import StageWorker, StudentModule
from tests.fixtures.busy import busy_loops

from .common import load


@dataclass(frozen=True)
class SpeedTest:
    stage: str
    function: str
    loop: str  # the catalogue's mutant id of a Python loop
    extended: bool

    @property
    def suite(self):
        """The stage's hidden test module: its speed_inputs and SLOWDOWN_LIMIT are what the test uses."""
        return importlib.import_module(f"tests.hidden.test_{self.stage}")


TESTS = (SpeedTest("a01_similarity", "similarity_matrix", "matrix_python_loop_over_rows", False),
         SpeedTest("a03_attention", "scaled_dot_product_attention", "python_loop_over_query_rows", True))


def _source(test: SpeedTest, variant: str) -> str:
    reference = (paths.SOLUTIONS / f"{test.stage}.py").read_text(encoding="utf-8")
    if variant == "reference":
        return reference
    mutant = next(m for m in mutants.load(test.stage, extended=test.extended) if m.id == test.loop)
    return mutants.apply(mutant, reference)


def shares(test: SpeedTest, variant: str, trials: int, server, work: Path) -> list:
    """The variant's time as a share of what the test allows, one per trial (a fresh worker each)."""
    stage = stages.get(test.stage)
    sub = work / f"{test.stage}-{variant}"
    sub.mkdir()
    (sub / stage.module_file).write_text(_source(test, variant), encoding="utf-8")
    reference = getattr(testing.reference(test.stage), test.function)
    plan = isolation.Isolation.choose("auto").for_stage(stage)
    found = []
    for trial in range(trials):
        scratch = work / f"{test.stage}-{variant}-{trial}"
        scratch.mkdir()
        worker = StageWorker(stage, str(sub), plan, server, str(scratch), budget_s=120)
        try:
            slow = testing.cpu_slowdown(StudentModule(worker), test.function, reference,
                                        test.suite.speed_inputs(np.random.default_rng(trial)), lambda value, args: None)
        finally:
            worker.close()
        found.append(slow.student / slow.allowed(test.suite.SLOWDOWN_LIMIT))
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run beside")
    args = parser.parse_args(argv)
    server = forkservers.ForkServer("numpy", isolation.base_env(1))
    work = Path(tempfile.mkdtemp(prefix="speed-tests-"))
    os.chmod(work, 0o755)
    try:
        with busy_loops(args.busy):
            for test in TESTS:
                for variant in ("reference", "loop"):
                    found = shares(test, variant, args.trials, server, work)
                    print(f"{test.stage} {variant:9s} share of the allowed time over {args.trials} workers: "
                          f"max {max(found):.2f}, median {statistics.median(found):.2f}, min {min(found):.2f} "
                          f"(load {load()[0]}, {args.busy} busy loops beside)", flush=True)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
