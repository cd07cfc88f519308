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

from grader.sandbox.forkserver import EARLY_NAME, SERVER_NAME, SESSION_NAME

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

def smaps_rollup(pid: int) -> dict:
    """The kB figures of /proc/PID/smaps_rollup (Rss, Pss, Pss_Anon, Pss_File, ...); {} if gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1])
    except (OSError, ValueError):
        return {}
    return out


def high_water(pid: int) -> int:
    """The highest resident set process ``pid`` has had so far (VmHWM of /proc/PID/status), bytes; 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:")), 0)
    except (OSError, ValueError):
        return 0


class TreeSampler:
    """Samples the memory of a process and all its descendants every ``period``
    seconds, in a thread: the resident set (RSS, which counts a page shared by
    several processes once per process) and the proportional set (PSS, from
    /proc/PID/smaps_rollup: a page shared by n processes counts 1/n in each, so the
    sum over the tree is what the tree really holds, which is what a container's
    memory limit counts, page cache aside). Peaks: of each sum over the tree, and of
    each role (the command line tells: grading worker, fork server, pytest session,
    the rest)."""

    def __init__(self, pid: int, period: float = 0.05):
        import psutil
        self.psutil = psutil
        self.root = psutil.Process(pid)
        self.period = period
        self.peak_total = 0            # bytes, RSS summed over the tree
        self.peak_pss = 0              # bytes, PSS summed over the tree
        self.peak_pss_parts: dict = {}  # the PSS of each role at the moment of peak_pss
        self.peak_by_role: dict = {}
        self.peak_total_by_role: dict = {}
        self.peak_pss_by_role: dict = {}  # largest single process's PSS of each role
        self.peak_hwm_by_role: dict = {}  # largest high-water RSS (VmHWM) of a process of each role: its own peak,
        #                                   even between two samples
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def role(cmdline: list, parent_cmdline: list, name: str = "", parent_name: str = "") -> str:
        text = " ".join(cmdline)
        if name == SESSION_NAME:  # the session forked by a fork server: its command line is the server's
            return "pytest (trusted)"
        servers = {EARLY_NAME, *(SERVER_NAME.format(library=lib) for lib in ("torch", "numpy"))}
        if name in servers or "forkserver.py" in text:  # a worker is a fork of its fork server: same name
            # the library: in the server's name (and its workers'), or in its command line (before 2026-12-03)
            lib = next((f" ({lib})" for lib in ("torch", "numpy")
                        if name == SERVER_NAME.format(library=lib) or f" {lib} " in f" {text} "), "")
            if parent_name not in servers and "forkserver.py" not in " ".join(parent_cmdline):
                return "fork server" + lib
            return "worker" + lib if lib else "isolation probe"  # a child of a server not yet told its library
        if "jail.py" in text or cmdline[1:] == ["-I", "-"]:  # the probe in an interpreter of its own (since 12-04:
            return "isolation probe"                          # its program on standard input)
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
            total, pss_total, by_role, pss_by_role = 0, 0, {}, {}
            for p in procs:
                try:
                    parent = p.parent()
                    role = cache.get(p.pid) or self.role(p.cmdline(), parent.cmdline() if parent else [], p.name(),
                                                         parent.name() if parent else "")
                except ps.Error:
                    continue
                if not role.endswith("fork server") and not role.startswith("worker"):  # a server is named once
                    cache[p.pid] = role  # told its library, a forked session just after its fork: ask again
                got = smaps_rollup(p.pid)
                if not got:
                    continue
                rss, pss = got.get("Rss", 0) * 1024, got.get("Pss", 0) * 1024
                self.peak_hwm_by_role[role] = max(self.peak_hwm_by_role.get(role, 0), high_water(p.pid))
                total += rss
                pss_total += pss
                by_role[role] = by_role.get(role, 0) + rss
                pss_by_role[role] = pss_by_role.get(role, 0) + pss
                self.peak_by_role[role] = max(self.peak_by_role.get(role, 0), rss)
                self.peak_pss_by_role[role] = max(self.peak_pss_by_role.get(role, 0), pss)
            for role, v in by_role.items():
                self.peak_total_by_role[role] = max(self.peak_total_by_role.get(role, 0), v)
            self.peak_total = max(self.peak_total, total)
            if pss_total > self.peak_pss:
                self.peak_pss, self.peak_pss_parts = pss_total, pss_by_role
            self.samples += 1
            self._stop.wait(self.period)

    def result(self) -> dict:
        mb = lambda b: round(b / 2**20, 1)  # noqa: E731
        return {"peak_tree_mb": mb(self.peak_total),
                "peak_pss_mb": mb(self.peak_pss),
                "peak_pss_mb_by_role_at_peak": {k: mb(v) for k, v in sorted(self.peak_pss_parts.items())},
                "peak_process_pss_mb_by_role": {k: mb(v) for k, v in sorted(self.peak_pss_by_role.items())},
                "peak_process_mb_by_role": {k: mb(v) for k, v in sorted(self.peak_by_role.items())},
                "peak_sum_mb_by_role": {k: mb(v) for k, v in sorted(self.peak_total_by_role.items())},
                "peak_hwm_mb_by_role": {k: mb(v) for k, v in sorted(self.peak_hwm_by_role.items())},
                "samples": self.samples, "period_s": self.period}


class CgroupUnavailable(RuntimeError):
    """No memory cgroup can be made here (the reason is the message)."""


class MemoryCgroup:
    """A child memory cgroup of this process's own, with a limit, for a command and its
    descendants: the way a container counts and limits memory. cgroup v2 (``memory.max``,
    ``memory.peak``, ``memory.events``) where its memory controller is ours to use, else the
    v1 memory controller (``memory.limit_in_bytes``, ``memory.max_usage_in_bytes``), which a
    container runtime on a v1 host uses. ``prefix()`` is an argv prefix that moves the
    command into the cgroup before it execs. Raises CgroupUnavailable with the reason.

    Both count page cache the cgroup first touches (reclaimable) besides the processes'
    own memory; a page already cached by someone else is not charged again."""

    def __init__(self, limit_mb: int | None = None, name: str = "grader-bench"):
        if os.geteuid() != 0:
            raise CgroupUnavailable("not root: a memory cgroup is made as root")
        self.limit_mb = limit_mb
        self.version, self.path = self._make(f"{name}-{os.getpid()}-{time.monotonic_ns()}")
        try:
            if limit_mb is not None:
                limit = str(int(limit_mb) * 2**20)
                if self.version == 2:
                    self._write("memory.max", limit)
                    if os.path.exists(self.path / "memory.swap.max"):
                        self._write("memory.swap.max", "0")
                else:
                    self._write("memory.limit_in_bytes", limit)
                    if os.path.exists(self.path / "memory.memsw.limit_in_bytes"):
                        self._write("memory.memsw.limit_in_bytes", limit)  # no swap beyond the limit
        except OSError as exc:
            self.remove()
            raise CgroupUnavailable(f"cannot set the limit in {self.path}: {exc}") from None

    @staticmethod
    def _mounts() -> list:
        out = []
        with open("/proc/self/mounts") as f:
            for line in f:
                dev, where, fstype, opts = line.split()[:4]
                out.append((where, fstype, opts.split(",")))
        return out

    @staticmethod
    def _own(hierarchy: str) -> str:
        """This process's path in the v1 hierarchy with controller ``hierarchy`` ("" for v2)."""
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers.split(",") == [hierarchy] or (hierarchy in controllers.split(",") and hierarchy):
                    return path
        raise CgroupUnavailable(f"/proc/self/cgroup names no {hierarchy or 'v2'} hierarchy")

    def _make(self, name: str):
        why = []
        mounts = self._mounts()
        for where, fstype, _opts in mounts:  # cgroup v2 with its memory controller
            if fstype != "cgroup2":
                continue
            try:
                own = Path(where) / self._own("").lstrip("/")
                if "memory" not in (own / "cgroup.controllers").read_text().split():
                    why.append(f"cgroup v2 at {where}: no memory controller in {own}")
                    continue
                if "memory" not in (own / "cgroup.subtree_control").read_text().split():
                    (own / "cgroup.subtree_control").write_text("+memory")
                child = own / name
                child.mkdir()
                return 2, child
            except (OSError, CgroupUnavailable) as exc:
                why.append(f"cgroup v2 at {where}: {exc}")
        for where, fstype, opts in mounts:  # the v1 memory controller
            if fstype != "cgroup" or "memory" not in opts:
                continue
            try:
                own = Path(where) / self._own("memory").lstrip("/")
                child = own / name
                child.mkdir()
                return 1, child
            except (OSError, CgroupUnavailable) as exc:
                why.append(f"cgroup v1 memory at {where}: {exc}")
        raise CgroupUnavailable("; ".join(why) or "no cgroup v2 or v1 memory hierarchy is mounted")

    def _write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def prefix(self) -> list:
        """argv prefix: the command joins the cgroup, then execs."""
        return ["sh", "-c", f'echo $$ > "{self.path / "cgroup.procs"}" && exec "$@"', "sh"]

    def peak_mb(self) -> float | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return round(int(self._read(name)) / 2**20, 1)
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int | None:
        """How many processes the kernel killed for the limit (None: not told)."""
        try:
            text = self._read("memory.events" if self.version == 2 else "memory.oom_control")
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return None

    def describe(self) -> str:
        limit = f", limit {self.limit_mb} MB" if self.limit_mb is not None else ""
        return f"cgroup v{self.version} {self.path}{limit}"

    def remove(self) -> None:
        """Remove the cgroup (its processes have exited by now; a straggler is killed first)."""
        try:
            for pid in self._read("cgroup.procs").split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
        except OSError:
            pass
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


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
