"""``make bench``'s ``replies`` line: what a hostile reply costs the trusted side, against a correct module's.

    python -m benchmarks.run --only replies

Grades stage 2 of the reference and of ``tests/hostile/reply_bomb`` (whose worker answers each call with a legally
framed bomb: a 64 MB array, 21 MB of empty lists, 150,000 empty arrays, one 8 MB array referenced 1,000 times, a
value nested 50,000 deep), each as ``grade --stages a02_softmax`` with its process tree sampled. The figure is
the trusted side's peak (the highest resident set, ``VmHWM``, of the grading command and of its session, which
reads the replies) with the bomb against the reference's; target: at most 300 MB more (issue 34), printed as the
ratio that is. Beside it: how long decoding each bomb takes before it is refused (``protocol.decode`` under the
bound of a softmax call, in this process), the costliest reply each bound still allows, and the IPC objects on
this machine before and after grading ``tests/hostile/ipc_leftovers``.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from grader.sandbox import protocol

from . import common

TARGET_MB = 300


def _hostile(case: str, folder: Path) -> Path:
    sub = folder / case
    sub.mkdir(parents=True, exist_ok=True)
    shutil.copy(common.GRADER_ROOT / "tests" / "hostile" / case / "a02_softmax.py", sub)
    return sub


def _trusted_peak_mb(sampler) -> float:
    """The largest high-water resident set among the trusted processes (the command and its session)."""
    peaks = sampler.result()["peak_hwm_mb_by_role"]
    return max(peaks.get(role, 0.0) for role in ("cli (trusted)", "pytest (trusted)"))


def _grade(sub: Path, out: Path, env: dict) -> tuple:
    argv = [common.PY, "-m", "grader", "grade", str(sub), "--stages", "a02_softmax", "--quiet", "--threads", "1",
            "--out", str(out)]
    wall, cp, sampler = common.run_timed(argv, env=env, sampler=True, timeout=1800)
    rep = json.loads(out.read_text())
    return _trusted_peak_mb(sampler), wall, rep


def _bombs() -> dict:
    """name -> message (without its length prefix), exactly as reply_bomb's worker writes them."""
    spec = importlib.util.spec_from_file_location("reply_bomb", common.GRADER_ROOT / "tests" / "hostile" /
                                                  "reply_bomb" / "a02_softmax.py")
    bomb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bomb)
    names = ("a 64 MB array", "21 MB of empty lists", "150,000 empty arrays", "an 8 MB array 1,000 times",
             "nested 50,000 deep")
    frames = list(bomb._bombs())
    assert len(frames) == len(names), "reply_bomb's bombs changed: name them here"
    return {name: frame[8:] for name, frame in zip(names, frames)}


def _decode_costs(bound: protocol.Bound) -> list:
    """(name, seconds, MB allocated, outcome) of decoding each bomb, and the costliest replies the bound allows."""
    sys.path.insert(0, str(common.GRADER_ROOT / "tests" / "project"))
    try:
        from test_protocol import AT_BOUND  # the costliest replies each measure allows (test_protocol.py)
    finally:
        sys.path.pop(0)
    cases = [*_bombs().items(), *((f"at the bound: {name}", make()) for name, (make, _) in AT_BOUND.items())]
    out = []
    for name, message in cases:
        start = time.perf_counter()
        outcome = _decoded(message, bound)
        seconds = time.perf_counter() - start
        tracemalloc.start()  # a second time, for its allocations (tracemalloc slows the decoding down)
        _decoded(message, bound)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out.append((name, seconds, peak, outcome))
    return out


def _decoded(message, bound) -> str:
    try:
        protocol.decode(message, bound=bound)
        return "decoded"
    except protocol.ProtocolError as exc:
        return f"refused: {exc}"


def run(ctx, log) -> common.Result:
    sys.path.insert(0, str(common.GRADER_ROOT / "tests" / "project"))
    try:
        import leftovers  # what a grading could leave behind: System V objects, POSIX queues
    finally:
        sys.path.pop(0)
    env = common.user_env(ctx.keep_env)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    work = common.WORK / "replies"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    runs = {"reference": [], "reply_bomb": []}
    subs = {"reference": common.GRADER_ROOT / "solutions", "reply_bomb": _hostile("reply_bomb", work)}
    for _ in range(ctx.repeat or 2):
        for name, sub in subs.items():
            peak, wall, rep = _grade(sub, work / f"{name}.json", env)
            stage = rep["stages"][0]
            runs[name].append({"trusted_peak_mb": peak, "wall_s": wall, "score": stage["score"],
                               "statuses": sorted({t["status"] for t in stage["tests"]})})
            log(f"  {name}: trusted side's peak {peak:.0f} MB, {wall:.1f} s, a02 {stage['score']:g}")
    ref, bomb = (min(r["trusted_peak_mb"] for r in runs[n]) for n in ("reference", "reply_bomb"))
    extra = bomb - ref
    request = protocol.Size.of(protocol.encode({"op": "call", "name": "softmax", "args": [np.zeros((4, 5))],
                                                "kwargs": {"axis": -1}}))
    costs = _decode_costs(protocol.Bound.answering(request))
    before = leftovers.ipc_objects()
    _grade(_hostile("ipc_leftovers", work), work / "ipc_leftovers.json", env)
    after = leftovers.ipc_objects()
    notes = [f"figure = the trusted side's peak (VmHWM of the command and its session) grading reply_bomb minus "
             f"the reference's: {bomb:.0f} - {ref:.0f} MB = {extra:.0f} MB (target <= {TARGET_MB} MB); best of "
             f"{len(runs['reference'])} run(s) each",
             f"reply_bomb's stage 2: score {runs['reply_bomb'][0]['score']:g}, test statuses "
             f"{', '.join(runs['reply_bomb'][0]['statuses'])}",
             "decoding, under the bound of a softmax call: " + "; ".join(
                 f"{name}: {seconds * 1e3:.1f} ms, {mb:.1f} MB allocated, {outcome[:70]}"
                 for name, seconds, mb, outcome in costs),
             f"IPC objects on this machine before and after grading ipc_leftovers: {len(before)} and {len(after)}"
             + (f" (new: {sorted(after - before)})" if after - before else "")]
    target = f"<= {(ref + TARGET_MB) / ref:.2f}"  # the reference's peak and 300 MB, as a ratio
    return common.Result("replies", "what a hostile reply costs the trusted side vs a correct module's",
                         "reply_bomb", bomb, "reference", ref, "MB", bomb / ref, target,
                         extra <= TARGET_MB and not after - before, notes,
                         {"runs": runs, "decode": costs, "ipc_before": len(before), "ipc_after": len(after)})
