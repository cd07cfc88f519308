"""Shared helpers of the benchmarks: timing whole commands, interleaved repeats,
the machine and its load, and peak memory of a process tree.

The machine these run on is shared and noisy (2 cores, several people), so
every figure is a *ratio of two things measured in the same run*, taken from
interleaved repeats (A B A B ..., order alternating) so that both sides see
the same background load; the ratio uses the minimum of each side (the least
disturbed run), and the median ratio of the pairs is printed beside it.
"""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "benchmarks" / "work"          # git-ignored; also hidden from grading workers
PY = sys.executable
GRADER_ROOT = ROOT  # the course tree whose grader is measured (``--root``: e.g. a patched copy)


def set_grader_root(path) -> None:
    global GRADER_ROOT
    GRADER_ROOT = Path(path).resolve()


# ---------------------------------------------------------------- the machine

def machine() -> dict:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    info = {"nproc": os.cpu_count(), "cpu": cpu, "memory_gb": mem_gb, "python": platform.python_version(),
            "kernel": platform.release(), "root": os.geteuid() == 0}
    for lib in ("numpy", "torch", "pytest"):
        try:
            r = subprocess.run([PY, "-c", f"import {lib}; print({lib}.__version__)"], capture_output=True,
                               text=True, timeout=120)
            info[lib] = r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return info


def load() -> tuple:
    """The 1, 5 and 15 minute load averages."""
    return tuple(round(x, 2) for x in os.getloadavg())


class CpuContention:
    """Share of the machine's CPU time used by processes other than ours while it runs
    (from /proc/stat and our own children's rusage): how noisy the run was."""

    def __init__(self):
        self.start = self._stat()

    @staticmethod
    def _stat():
        with open("/proc/stat") as f:
            parts = f.readline().split()[1:]
        vals = list(map(int, parts))
        idle = vals[3] + vals[4]
        return sum(vals[:8]), idle

    def busy_fraction(self) -> float:
        total0, idle0 = self.start
        total1, idle1 = self._stat()
        dt = total1 - total0
        return round(1 - (idle1 - idle0) / dt, 3) if dt > 0 else 0.0


# ---------------------------------------------------------------- timing

def run_timed(argv, *, env=None, cwd=None, timeout=1800, check=True, sampler=False):
    """Run a command, return (wall seconds, CompletedProcess[, Sampler]).

    ``CompletedProcess.cpu_s`` is the CPU time (user + system) of the command and
    every descendant it waited for: far less sensitive to other people's load
    than the wall time. Only one command runs at a time here, so the difference
    of RUSAGE_CHILDREN before and after is this command's."""
    import resource
    env = dict(os.environ if env is None else env)
    cwd = GRADER_ROOT if cwd is None else cwd
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s = TreeSampler(proc.pid).start() if sampler else None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"timed out after {timeout} s: {' '.join(map(str, argv))}") from None
    seconds = time.perf_counter() - start
    if s:
        s.stop()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cp = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    cp.cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if check and proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(map(str, argv))}\n{out[-2000:]}\n{err[-2000:]}")
    return (seconds, cp, s) if sampler else (seconds, cp)


def interleaved(variants: dict, repeat: int, warmup: int = 1) -> dict:
    """Time each zero-argument callable ``repeat`` times, interleaved (the order flips
    every round so neither side always goes first). A callable returns its own
    seconds (or None: then its wall time is used). Returns name -> [seconds]."""
    names = list(variants)
    for _ in range(warmup):
        for n in names:
            variants[n]()
    times = {n: [] for n in names}
    for r in range(repeat):
        for n in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            got = variants[n]()
            times[n].append(got if isinstance(got, (int, float)) else time.perf_counter() - start)
    return times


def summary(xs) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "n": len(xs), "all": [round(x, 6) for x in xs]}


def paired_ratio(a, b) -> float:
    """Median of the per-round ratios a[i]/b[i] (both sides ran back to back)."""
    return statistics.median(x / y for x, y in zip(a, b))


# ---------------------------------------------------------------- memory

class TreeSampler:
    """Samples the resident memory of a process and all its descendants every
    ``period`` seconds, in a thread. Peaks: of the sum over the tree, and of each
    role (the command line tells: grading worker, pytest session, the rest)."""

    def __init__(self, pid: int, period: float = 0.05):
        import psutil
        self.psutil = psutil
        self.root = psutil.Process(pid)
        self.period = period
        self.peak_total = 0
        self.peak_by_role: dict = {}
        self.peak_total_by_role: dict = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def role(cmdline: list, parent_cmdline: list) -> str:
        text = " ".join(cmdline)
        if "forkserver.py" in text:  # a worker is a fork of its fork server: same command line
            return "worker" if "forkserver.py" in " ".join(parent_cmdline) else "fork server"
        if "pytest" in text:
            return "pytest (trusted)"
        return "cli (trusted)"

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _loop(self):
        ps = self.psutil
        cache: dict = {}
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except ps.Error:
                break
            total, by_role = 0, {}
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    if p.pid not in cache:
                        cache[p.pid] = self.role(p.cmdline(), p.parent().cmdline() if p.parent() else [])
                except ps.Error:
                    continue
                role = cache[p.pid]
                total += rss
                by_role[role] = by_role.get(role, 0) + rss
                self.peak_by_role[role] = max(self.peak_by_role.get(role, 0), rss)
            for role, v in by_role.items():
                self.peak_total_by_role[role] = max(self.peak_total_by_role.get(role, 0), v)
            self.peak_total = max(self.peak_total, total)
            self.samples += 1
            self._stop.wait(self.period)

    def result(self) -> dict:
        mb = lambda b: round(b / 2**20, 1)  # noqa: E731
        return {"peak_tree_mb": mb(self.peak_total),
                "peak_process_mb_by_role": {k: mb(v) for k, v in sorted(self.peak_by_role.items())},
                "peak_sum_mb_by_role": {k: mb(v) for k, v in sorted(self.peak_total_by_role.items())},
                "samples": self.samples, "period_s": self.period}


# ---------------------------------------------------------------- results

@dataclass
class Result:
    name: str                 # --only key
    title: str                # what is compared
    ours: str                 # label of our side
    ours_value: float
    base: str                 # label of the baseline
    base_value: float
    unit: str                 # of the two values
    ratio: float | None       # ours / base (or throughput ratio)
    target: str               # e.g. "<= 1.3x"
    passed: bool | None       # None: information only / could not run
    notes: list = field(default_factory=list)
    details: dict = field(default_factory=dict)
    load_before: tuple = ()
    load_after: tuple = ()
    busy: float | None = None  # fraction of the whole machine's CPU busy during the benchmark
    seconds: float = 0.0
    error: str = ""

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        return {True: "PASS", False: "MISS", None: "INFO"}[self.passed]


def check_target(ratio: float, target: str) -> bool:
    op, value = target.split()
    value = float(value.rstrip("x×"))
    return ratio <= value if op == "<=" else ratio >= value


def fmt_s(x: float) -> str:
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms"
    return f"{x * 1e6:.0f} µs"


def user_env(keep_env: bool) -> dict:
    """The environment the graded commands run in. A user's shell does not normally set
    PYTHONDONTWRITEBYTECODE (this workplace's sessions do): unless --keep-env, it is
    removed so that Python keeps its bytecode caches, as on a student's laptop."""
    env = dict(os.environ)
    if not keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if GRADER_ROOT != ROOT:  # `python -m grader` from the copy given with --root
        env["PYTHONPATH"] = str(GRADER_ROOT)
    return env
