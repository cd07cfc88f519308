"""How a worker process is confined, and what the report says about it.

The machine decides, not the user id: :func:`probe` (once per process) tries in
throwaway children what :func:`grader.sandbox.jail.confine` would do (Landlock,
seccomp, then each route strongest first: :mod:`grader.sandbox.plan`), and
:meth:`Isolation.choose` takes the result. The report says, layer by layer, what
was applied and how (``via``), or why not.

What a worker is promised (the *guarantees*; they decide the mode):

``secrets_hidden``      it cannot read the hidden tests, solutions, hidden data, course secret,
                        stand-ins or other submissions: a new root, Landlock, or file permissions
                        (a uid of its own that may not read them);
``network``             it reaches nothing: a network namespace with no interface, or seccomp
                        (no socket at all), with Landlock refusing TCP where it can;
``grader_unreachable``  it cannot signal, trace, read the memory of, or change the limits, scheduling or
                        priority of the grader or another worker, nor see their command lines: a uid of
                        its own or seccomp (no call on another process), every grader process
                        non-dumpable, and a /proc that shows it no grader process (Landlock: its own
                        entry only; or a /proc of its own with ``hidepid``), as the probe saw;
``writes_confined``     it may write only its scratch folder, and nothing it makes outlives it: files
                        (a new root, or Landlock), System V and POSIX IPC objects (an IPC namespace,
                        seccomp, or a uid of its own whose objects go when it ends) and processes
                        (seccomp: none; or a uid of its own whose processes are killed when it ends);
``limits``              CPU seconds, memory, open files, file size, and processes: no new process at
                        all (seccomp), or a limit counted for its own uid or user namespace.

How (the *mechanisms*, reported too): ``namespaces``, ``new_root``, ``separate_uid``, ``landlock``,
``seccomp``.

``strict``   every guarantee. ``partial``  secrets hidden, another guarantee missing.
``degraded`` the secrets are readable: ``grade`` and ``batch`` refuse it unless told
             that readable secrets are acceptable.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from grader.sandbox import jail
from grader.sandbox.plan import Plan, Probed, Route

from . import cores, paths

DEFAULT_LIMITS = {"cpu_s": 600, "memory_mb": 6144, "processes": 512, "open_files": 256, "file_mb": 16}
UID_BASE = 200_000  # one uid per trusted process: workers of parallel grades cannot see each other
# glibc's malloc raises its mmap threshold each time a large block is freed (up to 32 MB), so a
# torch process's activations end up in the heap, which fragments and is never returned: a stage-8
# worker grew to 570 MB. A fixed threshold of 4 MB gives large tensors back on free (peak PSS of
# stage 8 alone 1010 -> 884 MB) for no measurable CPU time; 1 MB and below cost ~25% more CPU
# (page faults on every batch). Set for the fork servers (their workers inherit it) and the session.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(4 * 2**20)}
# A worker's OpenMP threads (torch's, libgomp) spin at most 10,000 rounds at a barrier, then sleep: a spin is CPU
# time charged to the student (charging.py), and on a loaded machine a thread spins for as long as its sibling
# waits for a CPU. Stage 6 with 2 threads beside 2 busy loops: its training test 93 s with libgomp's default, 22 s
# so, 12 s with no spin at all (OMP_WAIT_POLICY=PASSIVE), which costs +47 % wall on a quiet machine (this: +3 %).
WAIT_ENV = {"GOMP_SPINCOUNT": "10000"}
MECHANISMS = ("namespaces", "new_root", "separate_uid", "landlock", "seccomp")
GUARANTEES = ("secrets_hidden", "network", "grader_unreachable", "writes_confined", "limits")
LAYERS = MECHANISMS + GUARANTEES


class IsolationUnavailable(RuntimeError):
    """The confinement asked for (or any, where secrets are at stake) cannot be had: a grader
    error, one line, no report."""


class ConfinementFailed(IsolationUnavailable):
    """A worker could not confine itself along the chosen route."""


class WorkerImportFailed(IsolationUnavailable):
    """A module the grader's own code needs (a probe's, a stand-in's, course-provided code's, or one
    installed for the grader that the submission imports) cannot be imported in a confined worker:
    the grader's environment fails, never the student. A grader error, one line, no report."""


class WorkerStarved(IsolationUnavailable):
    """The machine's load kept a worker waiting for a CPU until its wall-clock backstop fired, before it was
    charged its time (``grader.engine.charging``): not the student's timeout. A grader error, one line, no
    report; a batch grades the submission again after the others (its retry queue)."""


# The grader errors that cross from the grading session to run.grade (private/fatal.json), by name.
GRADER_ERRORS = {"isolation_unavailable": IsolationUnavailable, "confinement_failed": ConfinementFailed,
                 "worker_import_failed": WorkerImportFailed, "worker_starved": WorkerStarved}


def grader_error_to_json(exc: IsolationUnavailable) -> dict:
    """The error by the name of its nearest class in :data:`GRADER_ERRORS`, and its message."""
    names = {cls: name for name, cls in GRADER_ERRORS.items()}
    return {"error": next(names[c] for c in type(exc).__mro__ if c in names), "message": str(exc)}


def grader_error_from_json(data: dict) -> IsolationUnavailable:
    """The error :func:`grader_error_to_json` wrote; anything it cannot name is a failed confinement."""
    cls = GRADER_ERRORS.get(data.get("error"), ConfinementFailed)
    return cls(str(data.get("message") or data))


@dataclass(frozen=True)
class Layer:
    applied: bool
    how: str = ""  # applied: by what (the report's ``via``); else why not

    def to_json(self) -> dict:
        return {"applied": True, "via": self.how} if self.applied else {"applied": False, "why": self.how}

    @classmethod
    def from_json(cls, d: dict) -> Layer:
        return cls(d["applied"], d.get("via") or d.get("why") or "")


_probed: dict = {}
_probing = threading.Lock()  # a batch's grading threads ask at once; one probe answers them all


class ProbeFailed(RuntimeError):
    """The probe gave no answer (the text says why); :func:`probe` then finds no route."""


def _asked(secrets=None) -> dict:
    """What the probe is asked (:func:`grader.sandbox.jail.probe_as_asked`)."""
    return {"uid": UID_BASE + os.getpid(), "course": str(paths.ROOT),
            "secrets": [str(p) for p in (paths.SECRET_PATHS if secrets is None else secrets) if os.path.exists(p)]}


def _in_a_child(asked: dict):
    """Start the probe in a fresh ``python -I`` (never a fork of this process, which may hold threads): a
    function that waits for its answer, the JSON text of :class:`Probed` (or raises ProbeFailed). What it
    is asked comes in the program it reads on its standard input (``jail.probe_program``), never in its
    command line."""
    proc = subprocess.Popen([sys.executable, "-I", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    program = jail.probe_program(asked)

    def answer() -> str:
        try:
            out, err = proc.communicate(program, timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if proc.returncode != 0 or not out.strip():
            raise ProbeFailed((err.strip().splitlines() or [f"status {proc.returncode}"])[-1])
        return out
    return answer


def probe_soon(start) -> None:
    """Start :func:`probe`'s work now, so that it runs while this process imports the rest (numpy,
    pytest: about as long as the probe); :func:`probe` collects its answer. ``start(asked)`` runs it
    and returns a function that waits for the answer, as :func:`_in_a_child` does (the CLI has it run
    in the fork server it starts early, ``forkservers.start_soon``)."""
    if sys.platform == "linux" and not _probed:
        asked = _asked()
        _probed["pending"] = asked, start(asked)


def probe(secrets=None) -> Probed:
    """What this machine allows (:func:`grader.sandbox.jail.probe` in a fresh interpreter); cached per
    process, started early by :func:`probe_soon`. ``secrets``: the paths a confined child must not
    read (default: :data:`paths.SECRET_PATHS`)."""
    with _probing:
        return _probed["result"] if "result" in _probed else _probe(secrets)


def adopt(probed_json: str) -> None:
    """Take the probe of the process that started this one (a batch probes once for all its gradings:
    the same machine, the same course). A re-probe (after ``_make_private``) still runs here."""
    with _probing:
        _probed.clear()
        _probed["result"] = Probed.from_json(probed_json)


def _probe(secrets) -> Probed:
    if sys.platform != "linux":
        _probed["result"] = Probed(Route.NONE, False, {"root": f"not Linux ({sys.platform})"},
                                   landlock_why="not Linux", seccomp_why="not Linux")
        return _probed["result"]
    if "pending" in _probed and secrets is None:
        asked, answer = _probed.pop("pending")
    else:
        asked = _asked(secrets)
        answer = _in_a_child(asked)
    try:
        _probed["result"] = Probed.from_json(answer())
    except (ProbeFailed, ValueError, TypeError, KeyError) as exc:
        why = str(exc) if isinstance(exc, ProbeFailed) else f"the probe's answer is unreadable ({exc})"
        _probed["result"] = Probed(Route.NONE, False, {"probe": why}, landlock_why=why, seccomp_why=why,
                                   readable=asked["secrets"])
    return _probed["result"]


def _joined(why: dict, *keys) -> str:
    return "; ".join(f"{k}: {v}" for k, v in why.items() if not keys or k in keys)


def mechanisms(p: Probed) -> dict:
    """layer -> Layer for each mechanism the probe found (or why not)."""
    no_ns = "no namespaces: " + _joined(p.why, "root", "userns_uid", "userns", "probe")
    ns = {Route.ROOT: "mount, network and IPC namespaces", Route.USERNS: "user, mount, network and IPC namespaces"}
    uid_via = {Route.USERNS: "a uid of its own, mapped in its user namespace"}
    return {
        "namespaces": Layer(True, ns[p.route]) if p.route.namespaces else Layer(False, no_ns),
        "new_root": Layer(True, "chroot into a root holding only the Python installation and system folders")
        if p.route.namespaces else Layer(False, no_ns),
        "separate_uid": Layer(True, uid_via.get(p.route, "a uid of its own (setuid)")) if p.separate_uid else
        Layer(False, "the worker keeps the grader's uid (a uid of its own needs CAP_SETUID, and a Python "
                     "installation that uid can read: " + _joined(p.why, "root", "userns_uid", "setuid") + ")"),
        "landlock": Layer(True, f"Landlock ABI {p.landlock}") if p.landlock else Layer(False, p.landlock_why),
        "seccomp": Layer(True, f"a seccomp filter (libseccomp {p.seccomp})") if p.seccomp else
        Layer(False, p.seccomp_why),
    }


def calls_contained(p: Probed) -> bool:
    """No call of a worker confined as ``p`` acts on a grader process (a signal, a limit, its scheduling,
    a trace): it has a uid of its own, or seccomp refuses every such call. Else a fork server its
    workers could have changed is not used again (``forkservers.of_this_thread``)."""
    return p.separate_uid or bool(p.seccomp)


def guarantees(p: Probed, own_nproc: bool, permissions: str = "") -> dict:
    """layer -> Layer for each guarantee, from what the probe found (``permissions``: the secrets the
    grader made unreadable to other users, where file permissions are what hides them)."""
    ns, ll, sc, uid = p.route.namespaces, p.landlock, bool(p.seccomp), p.separate_uid
    by = lambda *pairs: ", ".join(name for name, ok in pairs if ok)  # noqa: E731
    secrets = by(("new root", ns), ("Landlock", ll), ("file permissions" + permissions, uid and not ns and not ll))
    out = {"secrets_hidden": Layer(True, secrets) if secrets and not p.readable else Layer(
        False, f"a worker confined as this machine allows could read {', '.join(p.readable)} (namespaces: "
        f"{_joined(p.why) or 'yes'}; Landlock: {p.landlock_why or 'yes'}; a uid of its own: {'yes' if uid else 'no'})")}
    net = by(("network namespace", ns), ("seccomp: no socket", sc), ("Landlock: no TCP", ll >= 4))
    out["network"] = Layer(True, net) if ns or sc else Layer(False, "no namespaces and no seccomp filter: the "
                                                                    "worker shares the grader's network")
    calls = by(("a uid of its own", uid), ("seccomp: no call on another process", sc))
    unseen = "Landlock: of /proc only its own entry" if ll else "a /proc of its own (hidepid)"
    missing = [why for why, lacking in (
        ("the worker keeps the grader's uid, without seccomp to refuse the calls that act on another process "
         "(kill, prlimit, setpriority, sched_setaffinity, ptrace, ...)", not calls_contained(p)),
        ("it sees the grader's processes and their command lines in /proc (no Landlock, and no /proc of its own "
         "that hides them)", p.sees_grader)) if lacking]
    out["grader_unreachable"] = Layer(False, "; ".join(missing)) if missing else Layer(
        True, f"{calls}; grader processes non-dumpable; {unseen}")
    files, ipc = by(("new root", ns), ("Landlock", ll)), by(("IPC namespace", ns), ("seccomp", sc))
    ipc = ipc or ("its uid's objects removed when it ends" if uid else "")
    processes = "seccomp: none" if sc else "its uid's killed when it ends" if uid else ""
    missing = [why for why, lacking in (
        ("no namespaces and no Landlock: the worker may write wherever its uid may (/tmp, /dev/shm)", not files),
        ("no IPC namespace, no seccomp and no uid of its own: its System V IPC objects may outlive it", not ipc),
        ("no seccomp and no uid of its own: a process it starts may outlive it", not processes)) if lacking]
    out["writes_confined"] = Layer(False, "; ".join(missing)) if missing else Layer(
        True, f"{files}; IPC objects: {ipc}; processes: {processes}")
    base = "CPU, memory, open files, file size"
    if sc:
        out["limits"] = Layer(True, f"{base}; no new process (seccomp)")
    elif own_nproc:
        out["limits"] = Layer(True, f"{base}, processes (counted for its own "
                                    f"{'uid' if uid else 'user namespace'})")
    else:
        out["limits"] = Layer(False, f"{base} only: no processes limit (with the grader's uid it would count "
                                     "the grader's processes)")
    return out


@dataclass
class Isolation:
    probed: Probed
    layers: dict  # layer -> Layer
    limits: dict = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    extra_hidden: list = field(default_factory=list)
    confine: bool = True  # False: `--isolation degraded` was asked for (no mechanism at all)

    @property
    def route(self) -> Route:
        return self.probed.route if self.confine else Route.NONE

    @property
    def separate_uid(self) -> bool:
        return self.confine and self.probed.separate_uid

    @property
    def own_nproc(self) -> bool:
        """A processes limit counts only the worker's own processes: a uid of its own, or a user
        namespace where the kernel counts them per namespace (the probe measures it)."""
        return self.separate_uid or (self.route is Route.USERNS and self.probed.nproc_in_userns)

    @property
    def mode(self) -> str:
        if not self.layers["secrets_hidden"].applied:
            return "degraded"
        return "strict" if all(self.layers[g].applied for g in GUARANTEES) else "partial"

    @property
    def why(self) -> dict:
        """guarantee -> why it is missing."""
        return {g: self.layers[g].how for g in GUARANTEES if not self.layers[g].applied}

    def for_stage(self, stage) -> Isolation:
        """A copy with the stage's memory and CPU-seconds limits (CPU: twice its wall-clock budget)."""
        limits = {**self.limits, "memory_mb": stage.memory_mb, "cpu_s": int(max(60, 2 * stage.time_limit_s))}
        return Isolation(self.probed, dict(self.layers), limits, list(self.extra_hidden), self.confine)

    @classmethod
    def choose(cls, requested: str = "auto", extra_hidden=(), *, kind: str = "hidden",
               allow_readable_secrets: bool = False) -> Isolation:
        """``auto``: the strongest the machine allows; ``strict``: every guarantee or
        IsolationUnavailable; ``degraded``: no confinement at all, asked for (itself an opt-in to
        readable secrets). ``auto`` that cannot hide the secrets from a worker, with ``kind``
        "hidden", refuses unless ``allow_readable_secrets``."""
        hidden = [str(p) for p in extra_hidden]
        shield()
        if requested == "degraded":
            asked = "isolation 'degraded' was asked for"
            found = Probed(Route.NONE, False, {"asked": asked}, landlock_why=asked, seccomp_why=asked)
            return cls(found, {layer: Layer(False, asked) for layer in LAYERS}, extra_hidden=hidden, confine=False)
        if requested not in ("auto", "strict"):
            raise ValueError(f"unknown isolation {requested!r}")
        found, permissions = probe(), ""
        if found.readable and found.separate_uid and not found.route.namespaces and not found.landlock:
            permissions = _make_private([*found.readable, *hidden])
            _probed.clear()
            found = probe()
        own = found.separate_uid or (found.route is Route.USERNS and found.nproc_in_userns)
        chosen = cls(found, {**mechanisms(found), **guarantees(found, own, permissions)}, extra_hidden=hidden)
        if requested == "strict" and chosen.why:
            raise IsolationUnavailable(
                "--isolation strict: this machine cannot give every guarantee (" +
                "; ".join(f"{k}: {v}" for k, v in chosen.why.items()) + "); use --isolation auto, or run as root")
        if chosen.mode == "degraded" and kind == "hidden" and not allow_readable_secrets:
            raise IsolationUnavailable(
                "refusing to grade: the worker could read the hidden tests and solutions here "
                f"({chosen.layers['secrets_hidden'].how}); run as root, allow unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1), or use a kernel with Landlock (Linux 5.13+); "
                "or pass --allow-readable-secrets")
        if chosen.mode == "degraded":
            why = chosen.layers["secrets_hidden"].how
            chosen.layers["secrets_hidden"] = Layer(False, (
                "readable secrets accepted (--allow-readable-secrets); " if kind == "hidden" else
                "public tests only: no secrets at stake; ") + why)
        return chosen

    def to_json(self) -> str:
        return json.dumps({"probed": self.probed.to_json(), "confine": self.confine,
                           "layers": {k: v.to_json() for k, v in self.layers.items()}})

    @classmethod
    def from_json(cls, text: str, extra_hidden=()) -> Isolation:
        d = json.loads(text)
        return cls(Probed.from_json(d["probed"]), {k: Layer.from_json(v) for k, v in d["layers"].items()},
                   extra_hidden=[str(p) for p in extra_hidden], confine=d["confine"])

    @property
    def uid(self):
        return UID_BASE + os.getpid() if self.separate_uid else None

    def applied_limits(self) -> dict:
        """The limits a worker gets: no processes limit where it would count the grader's processes
        (the grader's uid, outside a user namespace that counts its own)."""
        return {k: v for k, v in self.limits.items() if k != "processes" or self.own_nproc}

    def describe(self) -> dict:
        """The report's ``isolation`` object."""
        mode, layers = self.mode, self.layers
        limits = self.applied_limits()
        got = [g for g in GUARANTEES if layers[g].applied]
        if mode == "strict":
            note = (f"worker confined by {', '.join(m for m in MECHANISMS if layers[m].applied)}: every guarantee "
                    f"({', '.join(got)})")
        elif mode == "partial":
            note = ("worker confined, tests, solutions and fixtures out of its reach; missing: "
                    + "; ".join(f"{k}: {v}" for k, v in self.why.items()))
        else:
            note = (f"no confinement of the secrets ({layers['secrets_hidden'].how}): worker is a separate "
                    "process with limits, and it can read the grader's files")
        return {
            "mode": mode,
            "separate_process": True,
            "separate_user": layers["separate_uid"].applied,
            "network": "none" if layers["network"].applied else "shared",
            "secrets_hidden": layers["secrets_hidden"].applied,
            "limits": {k: limits[k] for k in ("cpu_s", "memory_mb", "processes", "open_files", "file_mb")
                       if k in limits},
            "note": note,
            "layers": {layer: layers[layer].to_json() for layer in LAYERS},
        }

    def worker_env(self, home: str, threads: int) -> dict:
        return {**base_env(threads), "HOME": home, "TMPDIR": home,
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}

    def plan(self, cwd: str, env: dict, stash: str, hidden: list) -> Plan:
        """How :func:`grader.sandbox.jail.confine` confines a worker."""
        found = self.probed
        hide = [h for h in dict.fromkeys([*map(str, paths.SECRET_PATHS), *self.extra_hidden, *hidden])
                if os.path.exists(h)]
        return Plan(self.route, cwd, env, self.applied_limits(), uid=self.uid,
                    landlock=found.landlock if self.confine else 0, seccomp=self.confine and bool(found.seccomp),
                    hide=hide,
                    # the worker exposes its own interpreter and sys.path (jail.exposed_paths), never the course
                    course=str(paths.ROOT), stash=stash)


def shield() -> None:
    """Make this grader process non-dumpable: a worker that shares its uid may not read or write its
    memory, environment or descriptors through /proc (the grading process, its session, each fork server)."""
    jail.undumpable()


def _make_private(targets) -> str:
    """Take every permission of other users off ``targets`` (where file permissions alone hide the
    secrets: a uid of its own, no namespaces, no Landlock); what the report says was done."""
    done = []
    for path in dict.fromkeys(targets):
        try:
            mode = os.stat(path).st_mode
            if mode & stat.S_IRWXO:
                os.chmod(path, stat.S_IMODE(mode) & ~stat.S_IRWXO)
                done.append(path)
        except OSError:
            pass
    return f": other users' access taken off {', '.join(done)}" if done else ""


def one_line(described: dict) -> str:
    """What a worker got, for one line on stderr."""
    got = [k for k, v in described["layers"].items() if v["applied"]]
    lacking = [k for k, v in described["layers"].items() if not v["applied"]]
    return (f"isolation {described['mode']}: " + (", ".join(got) or "no layer")
            + (f"; without {', '.join(lacking)}" if lacking else ""))


def base_env(threads: int) -> dict:
    """What every process on the worker side of the boundary gets: a path, a
    locale, its BLAS/OpenMP threads, and threads that sleep while they wait."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **cores.blas_env(threads), **WAIT_ENV, **MALLOC_ENV}
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # some CPUs need these for correct BLAS
        if key in os.environ:
            env[key] = os.environ[key]
    return env
