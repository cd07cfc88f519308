"""The trusted side of the boundary: starts a worker for one stage and talks to it.

A worker serves one stage of one submission. If it hangs past its time or
dies, the current test gets ``timeout``/``crashed`` and the next request starts
a fresh worker, until the stage's budget is spent. Its time is charged as the
worker's own (``charging``: its CPU time, or its wall time less its waits for a
CPU), never the machine's load.
"""
from __future__ import annotations

import importlib.machinery
import os
import re
import signal
import struct
import sys
import tempfile
from pathlib import Path

from grader.sandbox import protocol
from grader.sandbox.protocol import ReplyKind

from ..i18n import tr
from . import charging, paths, testing
from . import isolation as iso
from .cputime import process_cpu_seconds
from .errors import ForbiddenCall, StudentError, StudentMissing, StudentTimeout, WorkerCrashed
from .forkservers import ForkServerFailed
from .static_check import imported_files, reach_arounds, scan

STAGE_MODULE = re.compile(r"a\d\d_\w+")
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
        self.clock = charging.StageClock(budget_s)  # the stage's time, charged request by request
        self.budget_s = budget_s
        self.server = server  # grader.engine.forkservers.ForkServer of the stage's library
        self.pid = None
        self.load_reply = None
        self._ready = False  # whether the running worker said it is confined and ready
        self._control = None  # a worker of this stage with none of the submission's code (StageWorker.control)
        self.events: list[str] = []  # stage-level notes for the report
        self.timed_out = False
        self.crashes = 0
        self.timeouts = 0
        self._starts = 0
        self._bound = protocol.Bound.answering()  # what the next reply may hold (protocol.Bound)
        self.static_hits = self._scan()

    def _scan(self) -> list:
        """What the source of the files this stage's worker runs says, read here where nothing can rewrite
        it: the stage's forbidden APIs (in its module and the submission's own helper modules) and ways around
        the grader's rules (in every file it imports, earlier stages' included)."""
        hits = []
        files = imported_files(self.submission_dir, [self.stage.id, *self.stage.standins])
        for name in files:
            source = _source(os.path.join(self.submission_dir, name))
            if name == self.stage.module_file or not STAGE_MODULE.fullmatch(name[:-3]):
                hits += scan(source, name, self.stage.forbidden)
            starter = paths.STARTER / name
            hits += reach_arounds(source, name, _source(starter) if starter.is_file() else None)
        return hits

    # -- life cycle ------------------------------------------------------
    def _spawn(self, load: bool = True):
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
            raise WorkerCrashed(tr("not run: {error}", error=exc)) from None
        finally:
            os.close(req_r)  # the worker's ends
            os.close(rep_w)
        self._w, self._r = req_w, rep_r
        self._ready = False
        self._read(min(STARTUP_S, self._remaining()), tr("starting the worker"))
        self._ready = True  # from here on the submission's code runs: an exit is its own
        if load:
            self._send({"op": "load"})
            self.load_reply = self._read(self._remaining(), tr("importing the module"))

    def _remaining(self) -> float:
        return self.clock.remaining()

    def close(self):
        if self._control is not None:
            self._control.close()
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
            self._bound = protocol.Bound.answering(protocol.write_message(self._w, msg))
        except (BrokenPipeError, OSError):
            self._crashed(tr("while receiving its inputs"))

    def _read(self, timeout: float, doing: str):
        """The worker's next message, within ``timeout`` seconds of charged time (``charging.Window``)."""
        window = charging.Window(self.pid, max(0.0, timeout), self.threads)
        try:
            try:
                reply = protocol.read_message(self._r, bound=self._bound, wait=window.wait,
                                              decode_s=max(1.0, timeout - window.charged))
            finally:
                window.measure()
                self.clock.add(window)
            if not isinstance(reply, dict):
                raise protocol.ProtocolError(f"a reply that is a {type(reply).__name__}, not a dict")
            return reply
        except charging.Starved as exc:
            self._kill()
            raise iso.WorkerStarved(f"the machine's load kept the worker of {self.stage.id} waiting for a CPU "
                                    f"while {doing}: {exc}; this is not the student's timeout: grade the "
                                    "submission again when the machine is less busy") from None
        except TimeoutError:
            self._kill()
            self.timeouts += 1
            if self.clock.spent():
                self.timed_out = True
                raise StudentTimeout(tr("the stage used up its {seconds} s time limit while {doing}; look "
                                        "for an infinite loop or very slow code",
                                        seconds=f"{self.budget_s:.0f}", doing=doing)) from None
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
            what = tr("was killed by {signal}{why}", signal=sig, why=why)
        elif code == 97 and not self._ready:  # confining failed, before any of the submission's code ran
            why = " ".join(err.decode(errors="replace").split())[:500]
            raise iso.ConfinementFailed(f"a worker of {self.stage.id} could not be set up and confined "
                                        f"({self.isolation.mode} isolation): {why}")
        elif code is not None:
            what = tr("exited with status {code} (did the code call sys.exit or os._exit?)", code=code)
        else:
            what = tr("sent a malformed reply ({error})", error=exc)
        self.events.append(tr("worker {what} while {doing}", what=what, doing=doing))
        raise WorkerCrashed(tr("the process running your code {what} while {doing}", what=what, doing=doing))

    # -- the API used by tests -----------------------------------------
    def loaded(self) -> dict:
        """The reply to loading the module, starting a worker if none runs."""
        if self._remaining() <= 0:
            self.timed_out = True
            raise StudentTimeout(tr("the stage's {seconds} s time limit was already used up",
                                    seconds=f"{self.budget_s:.0f}"))
        if self.crashes >= GIVE_UP_AFTER["crashes"]:
            raise WorkerCrashed(tr("not run: the process running your code died {count} times in this "
                                   "stage", count=self.crashes))
        if self.timeouts >= GIVE_UP_AFTER["timeouts"]:
            self.timed_out = True
            raise StudentTimeout(tr("not run: {count} earlier calls in this stage never answered",
                                    count=self.timeouts))
        if self.pid is None:
            self._spawn()
        return self.load_reply

    def request(self, msg: dict, what: str, timeout: float | None = None, who: str | None = None):
        """Send ``msg`` and return the value of the reply; the student's failures raise. ``who``: the
        function (or check) whose inputs must come back unchanged (testing.assert_inputs_unchanged)."""
        return self.measured(msg, what, timeout, who)[0]

    def measured(self, msg: dict, what: str, timeout: float | None = None, who: str | None = None):
        """(the value of the reply, the worker's CPU seconds from sending ``msg`` to reading its reply), the
        time read from outside the worker (:mod:`grader.engine.cputime`): nothing the worker says about
        itself enters it."""
        load = self.loaded()
        kind = protocol.reply_kind(load)
        if kind is not None:
            if kind is ReplyKind.MISSING:
                raise StudentMissing(load["message"])
            if kind is ReplyKind.FORBIDDEN:
                raise ForbiddenCall(tr("importing the module failed: {message}",
                                       message=load.get('message')))
            self._check_import(load, tr("the import of {stage}.py", stage=self.stage.id))
            raise StudentError(load, what)
        started = self._cpu()
        self._send(msg)
        left = min(self.stage.call_timeout_s if timeout is None else timeout, self._remaining())
        reply = self._read(left, f"running {what}")
        used = self._cpu() - started
        forbidden = self.static_hits or reply.get("forbidden")
        if forbidden:
            raise ForbiddenCall(tr("{calls} — write this part yourself", calls="; ".join(map(str, forbidden))))
        if reply.get("ok"):
            if who is not None:
                testing.assert_inputs_unchanged(who, protocol.echoed(msg), reply.get("after"), reply.get("names"))
            return reply.get("value"), used
        kind = protocol.reply_kind(reply)
        if kind is ReplyKind.MISSING:
            raise StudentMissing(reply["message"])
        if kind is ReplyKind.GRADER:
            raise RuntimeError(f"grader problem: {reply.get('message')}")
        self._check_import(reply, what)
        raise StudentError(reply, what)

    def _cpu(self) -> float:
        """The worker's CPU seconds so far, read from the kernel's clock for it."""
        try:
            return process_cpu_seconds(self.pid)
        except ProcessLookupError:
            return 0.0  # it died: the read that follows says how

    def control(self, msg: dict, doing: str) -> tuple:
        """(the reply to ``msg``, the CPU seconds it took) in this stage's control worker: confined like the
        stage's worker, started by the same server, but holding none of the submission's code, so that what it
        answers and what it costs are the grader's own. Started at the first need, stopped with the stage.
        It failing is the grader's trouble (a grader error), never the student's."""
        if self._control is None or self._control.pid is None:
            control = StageWorker(self.stage, os.path.join(self.work_dir, "control-submission"), self.isolation,
                                  self.server, os.path.join(self.work_dir, "control"), budget_s=10 * STARTUP_S,
                                  threads=self.threads)
            os.makedirs(control.submission_dir, exist_ok=True)
            os.makedirs(control.work_dir, exist_ok=True)
            try:
                control._spawn(load=False)
            except (StudentTimeout, WorkerCrashed) as exc:
                raise iso.ConfinementFailed(f"the control worker of {self.stage.id} could not start: {exc}") from None
            self._control = control
        started = self._control._cpu()
        self._control._send(msg)
        try:
            reply = self._control._read(STARTUP_S, doing)
        except (StudentTimeout, WorkerCrashed) as exc:
            raise iso.ConfinementFailed(f"the control worker of {self.stage.id} failed while {doing}: {exc}") from None
        return reply, self._control._cpu() - started

    def _fails_without_the_submission(self, module: str) -> bool:
        """Whether importing ``module`` fails in the control worker: the worker's word that an import failure
        is the grader's is believed only then. A submission that broke the import itself, or forged the
        reply, is the student's."""
        return not self.control({"op": "import", "module": module}, f"importing {module}")[0].get("ok")

    def _check_import(self, reply: dict, what: str) -> None:
        """Raise WorkerImportFailed when ``reply`` is the grader's environment failing in the worker."""
        why = grader_import_failure(reply)
        if why and self._fails_without_the_submission(reply["import"]["module"]):
            place = f" at {reply['where']}" if reply.get("where") else ""
            text = (f"the grader cannot import {reply['import']['module']} in the worker ({why}): "
                    f"{reply.get('type')}: {reply.get('message')}{place}, while {self.stage.id} ran {what}; "
                    "the worker's new root lacks part of the grader's Python environment")
            raise iso.WorkerImportFailed(" ".join(text.split())[:1500])


def _source(path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


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
        return self.probe_cpu(name, **kwargs)[0]

    def timed(self, name, *args, **kwargs) -> tuple:
        """(``name(*args, **kwargs)``, the CPU seconds of the request in the worker, the CPU seconds of the same
        request without the call in the control worker), both read from outside, from the kernel's clocks. The
        second is the cost of receiving the arguments and sending them and a result of the same shape back,
        which no code of the submission can make dearer (:func:`testing.cpu_slowdown` takes it off). Send fresh
        inputs to each timed call: a module may remember answers."""
        msg = {"op": "call", "name": name, "args": list(args), "kwargs": kwargs}
        value, used = self._worker.measured(msg, describe_call(name, args, kwargs), who=name)
        _, overhead = self._worker.control({**msg, "dry": True, "like": protocol.shape_of(value)},
                                           "receiving and returning the arguments")
        return value, used, overhead

    def probe_cpu(self, name, **kwargs) -> tuple:
        """(the probe's reply, the worker's CPU seconds over it), measured from outside the worker."""
        kind = kwargs.get("kind")
        # i18n: {kind} is a class of the contract (e.g. MultiHeadAttention); {name} the name of the check.
        who = tr("your {kind}, in the {name} check,",
                 kind=kind if isinstance(kind, str) else 'code', name=name)
        return self._worker.measured({"op": "probe", "name": name, "kwargs": kwargs},
                                     tr("the {name} check", name=name), who=who)

    def has(self, name) -> bool:
        """Whether the module defines ``name`` (False if it could not be imported)."""
        reply = self._worker.loaded()
        return bool(reply.get("ok")) and name in reply.get("value", [])
