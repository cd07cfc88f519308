"""What the confinement layers cost: Landlock and seccomp beside the namespaces of the strict path
(``make bench``'s ``layers``), and the grader without them, for the comparison only.

    python -m benchmarks.layers without -- grade SUB --stages a02_softmax --out R.json

runs ``python -m grader ARGS`` with the probe's answer stripped of Landlock and seccomp (what the
strict path was before they came): the benchmark's yardstick, never a mode of the grader.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time

from grader.sandbox import jail, landlock, syscalls
from grader.sandbox.plan import Plan, Route


def _spawn(plan: Plan) -> float:
    """Seconds to fork a child that confines itself along ``plan`` and exits."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            jail.confine(plan)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - a benchmark child: the status says it failed
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f"confining along {plan.route.value} failed (status {status})")
    return time.perf_counter() - start


def spawn_costs(repeat: int = 20) -> dict:
    """Best seconds to confine one worker (as root): the namespaces of the strict path before
    Landlock and seccomp, with them, and without namespaces (Docker's default profile's route)."""
    from grader.engine import isolation  # start-up: only this benchmark needs the probe
    found = isolation.probe()
    if os.geteuid() != 0 or found.route is not Route.ROOT or not (found.landlock and found.seccomp):
        raise RuntimeError("needs root with namespaces, Landlock and seccomp")
    landlock.abi()  # load landlockpy and libseccomp before any child confines itself, as the fork server does
    syscalls.version()
    tmp = tempfile.mkdtemp(prefix="bench-layers-")
    os.chmod(tmp, 0o711)
    uid = isolation.UID_BASE + os.getpid()
    limits = dict(isolation.DEFAULT_LIMITS)
    try:
        plans = {}
        for name, route, abi, seccomp in (("namespaces", Route.ROOT, 0, False),
                                          ("namespaces+landlock+seccomp", Route.ROOT, found.landlock, True),
                                          ("setuid+landlock+seccomp", Route.SETUID, found.landlock, True)):
            cwd = os.path.join(tmp, name)
            os.makedirs(cwd)
            os.chown(cwd, uid, uid)
            plans[name] = Plan(route, cwd, {}, limits, uid=uid, landlock=abi, seccomp=seccomp,
                               hide=[str(p) for p in isolation.paths.SECRET_PATHS if p.exists()],
                               course=str(isolation.paths.ROOT), stash=os.path.join(tmp, name + "-stash"))
        best = {name: float("inf") for name in plans}
        for _ in range(repeat):
            for name, plan in plans.items():
                best[name] = min(best[name], _spawn(plan))
        return best
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] != ["without", "--"]:
        print(__doc__, file=sys.stderr)
        return 2
    from grader import cli
    from grader.engine import isolation
    found = isolation.probe()
    isolation._probed["result"] = dataclasses.replace(found, landlock=0, seccomp="", landlock_why="benchmark",
                                                      seccomp_why="benchmark")
    return cli.main(argv[2:])


if __name__ == "__main__":
    sys.exit(main())
