"""The ``grading`` benchmark: one whole grading of the reference now vs at an earlier commit.

The earlier commit (``BEFORE``: the measurement issue 23 started from) is unpacked with ``git archive`` into
``benchmarks/work/before-<commit>/`` (a plain copy: no worktree is registered in the repository) and graded
with this venv, ``python -m grader grade solutions`` run from inside it, so its own grader, suites and data are
the ones measured. The sides run the same command in turns (A B C C B A ...), every stage; the figure is the
best wall time of "now" with its default threads against the commit's (which used one); "now" with one
thread is printed beside it. The CPU time of each side's timed runs, and the peak PSS of one more run of each
side with its memory sampled (unsampled timing: the sampler takes CPU from a grading that uses both cores),
are printed beside it.
"""
from __future__ import annotations

import json
import shutil
import subprocess

from . import common
from .common import PY, ROOT, WORK, Result, check_target, interleaved, paired_ratio, run_timed

BEFORE = "39a71e6"  # one reference grading took 48.8 s here (issue 23)
TARGET = "<= 0.45"
ONE = "now, 1 thread"


def checkout(commit: str = BEFORE):
    """The course tree at ``commit``, unpacked once into benchmarks/work/."""
    folder = WORK / f"before-{commit}"
    if not (folder / "grader").is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run(ctx, log=print) -> Result:
    repeat = ctx.repeat or (1 if ctx.quick else 2)
    old = checkout()
    # "now" with its default threads (the cores it may use; the commit before used one), and with one
    sides = {"now": (common.GRADER_ROOT, []), ONE: (common.GRADER_ROOT, ["--threads", "1"]), BEFORE: (old, [])}
    runs = {name: [] for name in sides}

    def one(name, sampled=False):
        """One grading of side ``name``; ``sampled``: its memory sampled too. The sampler reads every
        process's smaps each 50 ms, which takes CPU from a grading that uses both cores, so the timed
        runs go unsampled and one more run of each side measures the memory."""
        def go():
            root, extra = sides[name]
            out = WORK / f"grading-{name.replace(' ', '').replace(',', '-')}.json"
            env = {**common.user_env(ctx.keep_env), "PYTHONPATH": str(root)}
            argv = [PY, "-m", "grader", "grade", "solutions", "--quiet", *extra, "--out", str(out)]
            wall, cp, *sampler = run_timed(argv, env=env, cwd=root, sampler=sampled, timeout=3600)
            rep = json.loads(out.read_text())
            memory = sampler[0].result() if sampled else None
            runs[name].append({"wall": wall, "cpu": cp.cpu_s, "score": rep["score"], "max_score": rep["max_score"],
                               "memory": memory, "timed": not sampled})
            log(f"  {name}: {wall:.1f} s wall, {cp.cpu_s:.1f} s CPU, score {rep['score']:g}/{rep['max_score']:g}"
                + (f", peak PSS {memory['peak_pss_mb']:.0f} MB (sampled run)" if sampled else ""))
            return wall
        return go

    times = interleaved({name: one(name) for name in sides}, repeat=repeat, warmup=0)
    for name in sides:
        one(name, sampled=True)()
    now, before = min(times["now"]), min(times[BEFORE])
    ratio = now / before
    cpu = {name: min(r["cpu"] for r in runs[name] if r["timed"]) for name in sides}
    pss = {name: max(r["memory"]["peak_pss_mb"] for r in runs[name] if r["memory"]) for name in sides}
    notes = [f"`python -m grader grade solutions`, every stage, {repeat} run(s) of each side interleaved, best of "
             f"each; median pair ratio {paired_ratio(times['now'], times[BEFORE]):.2f}x",
             f"CPU seconds of the process tree: {cpu['now']:.1f} vs {cpu[BEFORE]:.1f} "
             f"({cpu['now'] / cpu[BEFORE]:.2f}x); peak PSS {pss['now']:.0f} vs {pss[BEFORE]:.0f} MB",
             f"now with one torch thread (--threads 1, as {BEFORE}): {min(times[ONE]):.1f} s = "
             f"{min(times[ONE]) / before:.2f}x, CPU {cpu[ONE]:.1f} s",
             f"{BEFORE} unpacked by git archive into {old.relative_to(ROOT)}, graded with this venv"]
    bad = [r for side in runs.values() for r in side if abs(r["score"] - r["max_score"]) > 1e-9]
    if bad:
        notes.append(f"WARNING: the reference did not get full marks in {len(bad)} run(s)")
    return Result("grading", f"one whole grading of the reference: now vs commit {BEFORE}", "now", now,
                  BEFORE, before, "s", ratio, TARGET, check_target(ratio, TARGET), notes,
                  {"runs": runs, "times": times})
