"""How many Landlock rules a worker gets and how long applying them takes.

    python -m benchmarks.landlock_rules                 # this checkout, 30 workers of a05_encoder
    python -m benchmarks.landlock_rules --against REV   # and grader/sandbox/landlock.py's ``rules`` of commit REV

Forks workers that confine themselves as a grading's do (``jail.confine`` along the plan ``isolation`` chooses
for the stage, landlockpy and libseccomp loaded first, as the fork server does) and times ``landlock.restrict``
in each: the rules it computes, the ruleset, the kernel's calls. With ``--against``, the other commit's ``rules``
takes its turn in every round, so both sides see the same load. Needs Landlock; the route is the machine's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import types

from grader.engine import isolation, paths, stages
from grader.sandbox import jail, landlock, syscalls


def _rules_of(rev: str):
    """``rules`` of grader/sandbox/landlock.py at commit ``rev``."""
    source = subprocess.run(["git", "show", f"{rev}:grader/sandbox/landlock.py"], cwd=paths.ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"landlock_{rev}")
    exec(compile(source, f"landlock.py@{rev}", "exec"), module.__dict__)
    return module.rules


def measure(sides: dict, stage: str = "a05_encoder", rounds: int = 30) -> dict:
    """side -> (rules a worker gets, its restrict times in seconds), the sides' ``rules`` taking turns."""
    if not landlock.abi()[0]:
        raise RuntimeError("no Landlock here")
    syscalls.version()  # libseccomp, loaded before any child confines itself (forkserver.preload)
    timed, restrict, own_rules = {}, landlock.restrict, landlock.rules

    def timed_restrict(readable, writable, hide, course=None, version=0):
        start = time.perf_counter()
        restrict(readable, writable, hide, course, version)
        timed.update(seconds=time.perf_counter() - start,
                     rules=len(landlock.rules(readable, writable, hide, course)))

    chosen = isolation.Isolation.choose("auto").for_stage(stages.get(stage))
    found = {side: ([], []) for side in sides}
    landlock.restrict = timed_restrict
    try:
        with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as stash:
            os.chmod(cwd, 0o777)
            plan = chosen.plan(cwd, {}, stash, [])
            for _ in range(rounds):
                for side, rules in sides.items():
                    landlock.rules = rules
                    got, why = jail._attempt(plan, lambda: timed)
                    if got is None:
                        raise RuntimeError(f"a worker failed to confine itself: {why}")
                    found[side][0].append(got["rules"] + 1)  # and /dev/null
                    found[side][1].append(got["seconds"])
    finally:
        landlock.restrict, landlock.rules = restrict, own_rules
    return {side: (counts[0], times) for side, (counts, times) in found.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a commit whose landlock.rules takes turns with this checkout's")
    parser.add_argument("--stage", default="a05_encoder")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    sides = {"this checkout": landlock.rules}
    if args.against:
        sides[args.against] = _rules_of(args.against)
    for side, (rules, times) in measure(sides, args.stage, args.rounds).items():
        print(f"{side}: {rules} rules a worker, landlock.restrict median {statistics.median(times) * 1e3:.1f} ms, "
              f"best {min(times) * 1e3:.1f} ms over {len(times)} workers (load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
