"""The ``class`` line of ``make bench``: a class of whole submissions, graded as a course would grade it.

``count`` whole submissions (every stage; the reference, starter stubs and catalogued mistakes, as folders, zips
and notebooks: ``tests/fixtures/batch_class.py``) graded by ``python -m grader batch`` three ways, one after the
other: the local executor with 1 and with 2 workers, and a Dask cluster of separate processes (``dask
scheduler`` and ``dask worker --nworkers 2 --nthreads 1``, started as commands). For each: submissions per
minute (grading phase, as the batch prints it) and CPU seconds per submission (every process of the run:
batch, cluster, gradings, workers; orphans included, this process being their subreaper). Then the
projection to 1,000 whole submissions on 16 cores from the Dask run's CPU seconds per submission (every core
busy with one grading at a time, as on a dedicated cluster), against the target of 10 minutes, with the
projection from its wall time beside it (which also counts what other people's load took from this shared
machine), and where the time goes (the 2-worker run's reports: each stage's tests and the rest of the grading).
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import resource
import shutil
import time
from pathlib import Path

from grader.engine import stages as all_stages
from tests.fixtures import batch_class, dask_cluster

from .common import PY, WORK, Result, check_target, run_timed, user_env

COUNT, QUICK_COUNT = 8, 3
SUBMISSIONS, CORES, TARGET_MIN = 1000, 16, 10.0
SUMMARY = re.compile(r"graded now (\d+).*?([\d.]+) submissions/min over (\d+) s")


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _reap(within_s: float = 15.0) -> None:
    """Wait for every descendant this process adopted as it exits (their CPU time then counts in RUSAGE_CHILDREN),
    for at most ``within_s`` seconds."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.1)


def _reports(out: Path) -> list:
    return [json.loads(p.read_text()) for p in sorted((out / "reports").glob("*.json"))]


def _one(klass: Path, base: Path, key: str, workers: int, on_dask: bool, env: dict, log) -> dict:
    out = base / f"out-{key}"
    shutil.rmtree(out, ignore_errors=True)
    argv = [PY, "-m", "grader", "batch", str(klass), "--out", str(out), "--regrade"]
    cpu0 = _children_cpu()
    with contextlib.ExitStack() as stack:
        if on_dask:
            address, _ = stack.enter_context(dask_cluster.cluster(base / f"dask-{key}", nworkers=workers, env=env))
            argv += ["--executor", "dask", "--scheduler", address]
        else:
            argv += ["--workers", str(workers)]
        log(f"  class of {len(list(klass.iterdir()))} whole submissions, {key} ...")
        wall, cp = run_timed(argv, env=env, timeout=14400)
    _reap()
    cpu = _children_cpu() - cpu0
    m = SUMMARY.search(cp.stdout.replace("\n", " "))
    if not m:
        raise RuntimeError(f"could not read the batch summary:\n{cp.stdout[-2000:]}")
    graded, per_min, grading_s = int(m.group(1)), float(m.group(2)), float(m.group(3))
    cores = min(workers, os.cpu_count() or 1)
    got = {"graded": graded, "per_min": per_min, "grading_s": grading_s, "wall": wall, "cpu": cpu,
           "cpu_per_sub": cpu / max(1, graded), "cores": cores,
           "core_s_per_sub": cores * grading_s / max(1, graded),
           "reports": [{"score": r["score"], "duration_s": r["duration_s"],
                        "stages": {s["id"]: sum(t["duration_s"] for t in s["tests"]) for s in r["stages"]}}
                       for r in _reports(out)]}
    got["projection_min"] = SUBMISSIONS * got["cpu_per_sub"] / CORES / 60
    got["wall_projection_min"] = SUBMISSIONS * got["core_s_per_sub"] / CORES / 60
    log(f"  {key}: {graded} graded, {per_min:.2f}/min, {got['cpu_per_sub']:.1f} CPU-s per submission, "
        f"projection {got['projection_min']:.1f} min ({got['wall_projection_min']:.1f} from its wall time)")
    return got


def _where(run: dict) -> str:
    """Where a run's grading time went: each stage's tests and the rest of the grading, as shares of the
    gradings' wall time (from the reports) and, at those shares, of the run's CPU seconds per submission."""
    reps = run["reports"]
    grading = sum(r["duration_s"] for r in reps) or 1.0
    per_stage = {s.id: sum(r["stages"].get(s.id, 0.0) for r in reps) for s in all_stages.all_stages()}
    parts = sorted(per_stage.items(), key=lambda kv: -kv[1]) + [("the rest", grading - sum(per_stage.values()))]
    return ", ".join(f"{k} {v / grading:.0%} ({v / grading * run['cpu_per_sub']:.1f})" for k, v in parts)


def _set_subreaper() -> None:
    """Orphaned descendants (a fork server whose parent exited) become this process's children, so that their
    CPU time is counted when they are reaped."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def run(ctx, log) -> Result:
    count = ctx.class_count or (QUICK_COUNT if ctx.quick else COUNT)
    base = WORK / "class"
    klass = base / f"class-{count}"
    shutil.rmtree(klass, ignore_errors=True)  # rebuilt every time: the mutant catalogue changes
    made = batch_class.build(klass, count, None, seed=0)
    kinds = {}
    for _, label, _ in made:
        kinds[label.split()[0]] = kinds.get(label.split()[0], 0) + 1
    env = user_env(ctx.keep_env)
    _set_subreaper()
    sides = {"local-1": _one(klass, base, "local-1", 1, False, env, log),
             "local-2": _one(klass, base, "local-2", 2, False, env, log),
             "dask-2": _one(klass, base, "dask-2", 2, True, env, log)}
    dask = sides["dask-2"]
    ratio = dask["projection_min"] / TARGET_MIN
    best = min(s["cpu_per_sub"] for s in sides.values())
    notes = [f"{len(made)} whole submissions (every stage) from tests/fixtures/batch_class.py: "
             + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) + "; folders, zips, notebooks; run one after "
             "the other (local 1 worker, local 2 workers, Dask 2 worker processes)",
             *(f"{k}: {s['per_min']:.2f} submissions/min while grading ({s['graded']} in {s['grading_s']:.0f} s; "
               f"{s['wall']:.0f} s for the whole command), {s['cpu_per_sub']:.1f} CPU-s per submission -> "
               f"{SUBMISSIONS} on {CORES} cores in {s['projection_min']:.1f} min; from its wall time "
               f"({s['core_s_per_sub']:.1f} core-s per submission, this shared machine's other load included) "
               f"{s['wall_projection_min']:.1f} min" for k, s in sides.items()),
             f"figure: the projection from the Dask run's CPU time, {SUBMISSIONS} x {dask['cpu_per_sub']:.1f} CPU-s "
             f"/ {CORES} cores = {dask['projection_min']:.1f} min (target {TARGET_MIN:.0f} min): every core busy "
             "with one grading at a time, as on a dedicated cluster (the wall-time projection beside it also "
             "counts what other people's load took from this machine)",
             "where the time goes, local 2 workers (share of the gradings' wall time, and CPU-s per submission at "
             f"that share): {_where(sides['local-2'])}; the rest is intake, the session's start, the fork servers and "
             "the report",
             f"the Dask run's own cost: {dask['cpu_per_sub'] - sides['local-2']['cpu_per_sub']:+.1f} CPU-s per "
             f"submission beside local 2 workers ({(dask['cpu'] - sides['local-2']['cpu']):.0f} CPU-s in all: the "
             "scheduler, the worker processes' start and their own fork servers), spread over the class",
             f"to reach {TARGET_MIN:.0f} min: at most {CORES * TARGET_MIN * 60 / SUBMISSIONS:.1f} CPU-s per "
             f"submission on {CORES} cores (best here {best:.1f}), or {math.ceil(SUBMISSIONS * best / TARGET_MIN / 60)}"
             f" cores at today's cost"]
    return Result("class", f"a class of whole submissions: {SUBMISSIONS} on {CORES} cores, projected",
                  "Dask, 2 worker processes", dask["projection_min"], "target", TARGET_MIN, "min", ratio,
                  "<= 1", check_target(ratio, "<= 1"), notes, sides)
