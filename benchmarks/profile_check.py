"""Where the time of one ``grader check`` / ``grader grade`` goes.

    python -m benchmarks.profile_check                      # check a02_softmax on the reference
    python -m benchmarks.profile_check grade a02_softmax,a03_attention

Runs the command's entry point (``grader.cli.main``) under cProfile in this
process, and for ``grade`` the pytest session it starts under cProfile too (the
child's argv is rewritten to ``python -m cProfile -o FILE -m pytest ...``;
``check`` runs its session in its own process). Prints, for both
processes, the CPU seconds and the functions with the largest cumulative time,
and a phase table: CLI imports, the pytest session (its imports, the worker's
start and the module load, the tests), the report. Wall times are inflated on
a busy machine; CPU seconds (``time.process_time``) are not.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import time

from .common import ROOT, WORK


def _top(stats_or_path, n=25, pattern=None) -> str:
    buf = io.StringIO()
    st = pstats.Stats(stats_or_path, stream=buf) if isinstance(stats_or_path, str) else stats_or_path
    st.stream = buf
    st.sort_stats("cumulative")
    st.print_stats(*( [pattern, n] if pattern else [n]))
    return buf.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_check")
    p.add_argument("command", nargs="?", default="check", choices=["check", "grade"])
    p.add_argument("stages", nargs="?", default="a02_softmax")
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    stage_ids = [s for s in args.stages.split(",") if s]

    sub = WORK / "profile-sub"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir(parents=True)
    for s in stage_ids:
        shutil.copy(ROOT / "solutions" / f"{s}.py", sub / f"{s}.py")
    child_prof = str(WORK / "profile-pytest.prof")
    if os.path.exists(child_prof):
        os.remove(child_prof)

    t_import0 = time.perf_counter()
    c_import0 = time.process_time()
    import grader.engine.run as grun  # noqa: E402  (imported here so its import time is measured)
    from grader import cli
    import_wall, import_cpu = time.perf_counter() - t_import0, time.process_time() - c_import0

    real_run = subprocess.run
    child = {}

    def patched(cmd, **kw):
        if len(cmd) > 2 and cmd[1:3] == ["-m", "pytest"]:
            cmd = [cmd[0], "-m", "cProfile", "-o", child_prof, *cmd[1:]]
            t0 = time.perf_counter()
            out = real_run(cmd, **kw)
            child["wall"] = time.perf_counter() - t0
            return out
        return real_run(cmd, **kw)

    grun.subprocess.run = patched
    argv_cli = (["check", stage_ids[0], str(sub)] if args.command == "check"
                else ["grade", str(sub), "--stages", ",".join(stage_ids), "--quiet", "--out",
                      str(WORK / "profile-report.json")])
    prof = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    rusage0 = os.times()
    prof.enable()
    rc = cli.main(argv_cli)
    prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rusage1 = os.times()
    children_cpu = (rusage1.children_user - rusage0.children_user) + (rusage1.children_system - rusage0.children_system)
    grun.subprocess.run = real_run

    print(f"\n== python -m grader {' '.join(argv_cli)}  (exit {rc})")
    print(f"importing grader.cli + grader.engine.run here: {import_wall:.2f} s wall, {import_cpu:.2f} s CPU")
    print(f"cli.main: {wall:.2f} s wall; CPU {cpu:.2f} s in this process, {children_cpu:.2f} s in the pytest "
          f"session and the workers it waited for")
    if child:
        print(f"pytest session (wall, as seen from here): {child['wall']:.2f} s")
    st = pstats.Stats(prof)
    print("\n-- the trusted CLI process, by cumulative wall time --")
    print(_top(st, args.top))
    if os.path.exists(child_prof):
        print("\n-- the pytest session (trusted), by cumulative wall time --")
        print(_top(child_prof, args.top))
        print("\n-- the pytest session: the worker's life cycle --")
        print(_top(child_prof, 12, "worker_client"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
