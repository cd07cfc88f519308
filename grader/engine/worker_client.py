"""The trusted side of the boundary: starts a worker for one stage and talks to it.

A worker serves one stage of one submission. If it hangs past its time or
dies, the current test gets ``timeout``/``crashed`` and the next request starts
a fresh worker, until the stage's wall-clock budget is spent.
"""
from __future__ import annotations

import importlib.machinery
import os
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

from grader.sandbox import protocol
from grader.sandbox.protocol import ReplyKind

from ..i18n import tr
from . import isolation as iso
from . import paths, testing
from .errors import ForbiddenCall, StudentError, StudentMissing, StudentTimeout, WorkerCrashed
from .forkservers import ForkServerFailed
from .static_check import scan

STARTUP_S = 60.0
GIVE_UP_AFTER = {"crashes": 4, "timeouts": 3}  # then the stage's remaining tests fail at once


class StageWorker:
    def __init__(self, stage, submission_dir: str, isolation: iso.Isolation, server, work_dir: str,
                 budget_s: float, threads: int = 1, earlier=()):
        self.stage = stage  # grader.engine.stages.Stage
        self.earlier = list(earlier)  # grader.engine.earlier.EarlierModule: each earlier stage, own or stood in
        self.submission_dir = submission_dir
        self.isolation = isolation
        self.work_dir = work_dir
        self.threads = threads
        self.deadline = time.monotonic() + budget_s
        self.budget_s = budget_s
        self.server = server  # grader.engine.forkservers.ForkServer of the stage's library
        self.pid = None
        self.load_reply = None
        self.events: list[str] = []  # stage-level notes for the report
        self.timed_out = False
        self.crashes = 0
        self.timeouts = 0
        self._starts = 0
        self.static_hits = self._scan()

    def _scan(self) -> list:
        path = os.path.join(self.submission_dir, self.stage.module_file)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return scan(f.read(), os.path.basename(path), self.stage.forbidden)
        except OSError:
            return []

    # -- life cycle ------------------------------------------------------
    def _spawn(self):
        self._starts += 1
        scratch = os.path.join(self.work_dir, f"scratch{self._starts}")
        os.makedirs(scratch)
        for name in os.listdir(self.submission_dir):
            if name.endswith(".py"):
                src = os.path.join(self.submission_dir, name)
                if os.path.isfile(src) and not os.path.islink(src):
                    with open(src, "rb") as f, open(os.path.join(scratch, name), "wb") as g:
                        g.write(f.read())
        uid = self.isolation.uid
        if uid is not None:
            for root, _dirs, files in os.walk(scratch):
                for p in [root, *(os.path.join(root, f) for f in files)]:
                    os.chown(p, uid, uid)
        os.chmod(scratch, 0o700)

        config = {
            "stage": self.stage.id, "student_dir": scratch, "starter_dir": str(paths.STARTER),
            "earlier": [e.to_worker() for e in self.earlier], "forbidden": self.stage.forbidden,
            "torch_threads": self.threads, "library": self.stage.library,
        }
        plan = self.isolation.plan(cwd=scratch, env=self.isolation.worker_env(scratch, self.threads),
                                   stash=os.path.join(self.work_dir, "stash"), hidden=[self.submission_dir])
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self._stderr = tempfile.TemporaryFile()
        try:
            self.pid = self.server.spawn(config, plan.to_json(), (req_r, rep_w, self._stderr.fileno()),
                                         timeout=min(STARTUP_S, max(1.0, self._remaining())))
        except ForkServerFailed as exc:
            os.close(req_w)
            os.close(rep_r)
            self.crashes += 1
            self.events.append(str(exc))
            raise WorkerCrashed(tr("not run: {exc}", exc=exc)) from None
        finally:
            os.close(req_r)  # the worker's ends
            os.close(rep_w)
        self._w, self._r = req_w, rep_r
        self._read(min(STARTUP_S, self._remaining()), tr("starting the worker"))
        self._send({"op": "load"})
        self.load_reply = self._read(self._remaining(), tr("importing the module"))

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def close(self):
        if self.pid is None:
            return
        try:
            protocol.write_message(self._w, {"op": "exit"})
        except OSError:
            pass
        self._release(exited=self._exit_code(timeout=2) is not None)

    def _exit_code(self, timeout: float):
        """The worker's return code, or None (still running, or its fork server is gone:
        then init reaps it)."""
        try:
            return self.server.wait(self.pid, timeout=timeout)
        except ForkServerFailed:
            return None

    def _kill(self):
        self._release(exited=False)

    def _release(self, exited: bool):
        """Kill what is left of the worker's process group (the worker itself unless it
        has ``exited`` and been reaped, when its pid may already be reused) and close the pipes."""
        if self.pid is None:
            return
        kills = (os.killpg,) if exited else (os.killpg, os.kill)
        for kill in kills:
            try:
                kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not exited:
            self._exit_code(timeout=10)
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.pid = None

    # -- messages --------------------------------------------------------
    def _send(self, msg):
        try:
            protocol.write_message(self._w, msg)
        except (BrokenPipeError, OSError):
            self._crashed(tr("while receiving its inputs"))

    def _read(self, timeout: float, doing: str):
        try:
            return protocol.read_message(self._r, deadline=time.monotonic() + max(0.0, timeout))
        except TimeoutError:
            self._kill()
            self.timeouts += 1
            if time.monotonic() >= self.deadline - 0.01:
                self.timed_out = True
                raise StudentTimeout(tr("the stage used up its {self_budget_s} s time limit while {doing}; look "
                                        "for an infinite loop or very slow code",
                                        self_budget_s=f"{self.budget_s:.0f}", doing=doing)) from None
            raise StudentTimeout(tr("no answer after {timeout} s while {doing}; look for an infinite loop or "
                                    "very slow code", timeout=f"{timeout:.0f}", doing=doing)) from None
        except (EOFError, protocol.ProtocolError, struct.error) as exc:
            self._crashed(doing, exc)

    def _crashed(self, doing, exc=None):
        code = self._exit_code(timeout=1) if self.pid is not None else None
        err = b""
        if getattr(self, "_stderr", None):
            self._stderr.seek(0)
            err = self._stderr.read(2000)
        self._release(exited=code is not None)
        self.crashes += 1
        if code is not None and code < 0:
            sig = signal.Signals(-code).name
            why = {"SIGKILL": " (memory or CPU limit?)", "SIGXCPU": " (CPU time limit)",
                   "SIGSEGV": " (a crash in native code)", "SIGXFSZ": " (wrote too large a file)"}.get(sig, "")
            what = tr("was killed by {sig}{why}", sig=sig, why=why)
        elif code == 97:  # never a student's fault: the grader cannot keep its promise, so it stops
            why = " ".join(err.decode(errors="replace").split())[:500]
            raise iso.ConfinementFailed(f"a worker of {self.stage.id} could not be set up and confined "
                                        f"({self.isolation.mode} isolation): {why}")
        elif code is not None:
            what = tr("exited with status {code} (did the code call sys.exit or os._exit?)", code=code)
        else:
            what = tr("sent a malformed reply ({exc})", exc=exc)
        self.events.append(tr("worker {what} while {doing}", what=what, doing=doing))
        raise WorkerCrashed(tr("the process running your code {what} while {doing}", what=what, doing=doing))

    # -- the API used by tests -----------------------------------------
    def loaded(self) -> dict:
        """The reply to loading the module, starting a worker if none runs."""
        if self._remaining() <= 0:
            self.timed_out = True
            raise StudentTimeout(tr("the stage's {self_budget_s} s time limit was already used up",
                                    self_budget_s=f"{self.budget_s:.0f}"))
        if self.crashes >= GIVE_UP_AFTER["crashes"]:
            raise WorkerCrashed(tr("not run: the process running your code died {self_crashes} times in this "
                                   "stage", self_crashes=self.crashes))
        if self.timeouts >= GIVE_UP_AFTER["timeouts"]:
            self.timed_out = True
            raise StudentTimeout(tr("not run: {self_timeouts} earlier calls in this stage never answered",
                                    self_timeouts=self.timeouts))
        if self.pid is None:
            self._spawn()
        return self.load_reply

    def request(self, msg: dict, what: str, timeout: float | None = None, who: str | None = None):
        """Send ``msg`` and return the value of the reply; the student's failures raise. ``who``: the
        function (or check) whose inputs must come back unchanged (testing.assert_inputs_unchanged)."""
        load = self.loaded()
        kind = protocol.reply_kind(load)
        if kind is not None:
            if kind is ReplyKind.MISSING:
                raise StudentMissing(load["message"])
            if kind is ReplyKind.FORBIDDEN:
                raise ForbiddenCall(tr("importing the module failed: {load_get_message}",
                                       load_get_message=load.get('message')))
            self._check_import(load, tr("the import of {self_stage_id}.py", self_stage_id=self.stage.id))
            raise StudentError(load, what)
        self._send(msg)
        left = min(self.stage.call_timeout_s if timeout is None else timeout, self._remaining())
        reply = self._read(left, f"running {what}")
        forbidden = reply.get("forbidden") or self.static_hits
        if forbidden:
            raise ForbiddenCall(tr("{calls} — write this part yourself", calls="; ".join(forbidden)))
        if reply.get("ok"):
            if who is not None and reply.get("changed"):
                testing.assert_inputs_unchanged(who, {"args": msg.get("args", []), "kwargs": msg.get("kwargs", {})},
                                                reply["changed"])
            return reply.get("value")
        kind = protocol.reply_kind(reply)
        if kind is ReplyKind.MISSING:
            raise StudentMissing(reply["message"])
        if kind is ReplyKind.GRADER:
            raise RuntimeError(f"grader problem: {reply.get('message')}")
        self._check_import(reply, what)
        raise StudentError(reply, what)

    def _check_import(self, reply: dict, what: str) -> None:
        """Raise WorkerImportFailed when ``reply`` is the grader's environment failing in the worker."""
        why = grader_import_failure(reply)
        if why:
            place = f" at {reply['where']}" if reply.get("where") else ""
            text = (f"the grader cannot import {reply['import']['module']} in the worker ({why}): "
                    f"{reply.get('type')}: {reply.get('message')}{place}, while {self.stage.id} ran {what}; "
                    "the worker's new root lacks part of the grader's Python environment")
            raise iso.WorkerImportFailed(" ".join(text.split())[:1500])


def grader_import_failure(reply: dict):
    """Why a worker's ImportError is the grader's environment failing (None: the student's).

    Never for a student's module (a stage module ``aNN_*`` or a file of the submission). Always when
    the course's code (a probe, a stand-in, starter code) made the import. When the submission's
    own code made it, only for a module this worker cannot find although it is installed for the
    grader outside the course's sources (the trusted side finds it): importing a package the
    course does not provide, or a name a package lacks, stays the student's mistake."""
    imp = reply.get("import")
    if not isinstance(imp, dict) or not isinstance(imp.get("module"), str) or imp.get("student_module"):
        return None
    if imp.get("by") != "student":
        return "the course's own code imports it"
    if imp.get("not_found") and not imp.get("found_here") and installed_for_grader(imp["module"]):
        return "it is installed for the grader"
    return None


def installed_for_grader(name: str) -> bool:
    """Whether the module ``name`` is installed where the grader's interpreter finds it, outside the
    course's sources (whose modules a worker must not see), found without importing anything."""
    locations, spec = None, None
    for part in name.split("."):
        if spec is not None and locations is None:
            return False  # a module, not a package: it has no submodules
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, locations)
        except (ImportError, ValueError, OSError):
            return False
        if spec is None:
            return False
        locations = list(spec.submodule_search_locations) if spec.submodule_search_locations is not None else None
    where = [spec.origin] if spec.origin and spec.origin not in ("built-in", "frozen") else []
    where += locations or []
    return bool(where) and not any(_in_course_sources(w) for w in where)


def _in_course_sources(path: str) -> bool:
    """Inside the course folder but not inside the Python environment (a .venv in the course folder is
    where the grader's packages are installed, not course sources)."""
    real = Path(os.path.realpath(path))
    environments = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    return real.is_relative_to(os.path.realpath(paths.ROOT)) and not any(real.is_relative_to(e) for e in environments)


def describe_call(name, args, kwargs) -> str:
    def short(v):
        shape = getattr(v, "shape", None)
        if shape is not None:
            return f"<{type(v).__name__} {tuple(shape)}>"
        text = repr(v)
        return text if len(text) <= 20 else text[:17] + "..."
    parts = [short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


class StudentModule:
    """What a test sees as ``student``: the stage module behind the boundary."""

    def __init__(self, worker):
        self._worker = worker

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            what = describe_call(name, args, kwargs)
            return self._worker.request({"op": "call", "name": name, "args": list(args), "kwargs": kwargs}, what,
                                        who=name)
        call.__name__ = name
        return call

    def probe(self, name, **kwargs):
        kind = kwargs.get("kind")
        who = tr("your {kind_if_isinstance_kind}, in the {name} check,",
                 kind_if_isinstance_kind=kind if isinstance(kind, str) else 'code', name=name)
        return self._worker.request({"op": "probe", "name": name, "kwargs": kwargs}, tr("the {name} check",
                                                                                        name=name), who=who)

    def time_call(self, name, *args, repeat: int = 3, **kwargs) -> float:
        """Best wall time (s) of ``name(*args, **kwargs)`` measured inside the worker."""
        return self._worker.request({"op": "time_call", "name": name, "args": list(args), "kwargs": kwargs,
                                     "repeat": repeat}, describe_call(name, args, kwargs))

    def has(self, name) -> bool:
        """Whether the module defines ``name`` (False if it could not be imported)."""
        reply = self._worker.loaded()
        return bool(reply.get("ok")) and name in reply.get("value", [])
