"""The worker: imports one stage of a submission and serves calls on it.

Runs in a child of the fork server (:mod:`forkserver`), after it is confined,
with two pipe descriptors (requests in, replies out). Everything it receives and
sends goes through :mod:`protocol` (JSON + .npy, never pickle). Student output
on stdout/stderr is captured and capped; it never reaches the protocol pipe.

Requests (dicts):
  {"op": "load"}                          import the stage module (after stand-ins and guards)
  {"op": "call", "name", "args", "kwargs"}   call a module attribute
  {"op": "probe", "name", "kwargs"}      run probes/<stage>.py::<name>(module, **kwargs)
  {"op": "time_call", "name", "args", "kwargs", "repeat"}   best wall time of a call, seconds
Replies: {"ok": True, "value": ..., "forbidden": [...]} or
         {"ok": False, "kind": "error|missing|load_error|bad_return|forbidden", ...}; a failure that
         is an ImportError also carries "import" (:meth:`Worker._import_failure`)
"""
from __future__ import annotations

import importlib
import importlib.util
import io
import os
import re
import sys
import time
import traceback
import types

from . import forbid, protocol
from .forbid import ForbiddenCall

OUTPUT_CAP = 64 * 1024
_STAGE_MODULE = re.compile(r"a\d\d_\w+")
_SANDBOX = os.path.dirname(os.path.realpath(__file__))
_IMPORT_GUARD = os.path.realpath(forbid.__file__)


class CappedWriter(io.TextIOBase):
    """Keeps the first OUTPUT_CAP characters a submission prints, drops the rest."""

    def __init__(self):
        self.parts, self.size, self.dropped = [], 0, 0

    def write(self, s):
        s = str(s)
        room = OUTPUT_CAP - self.size
        if room > 0:
            self.parts.append(s[:room])
            self.size += min(len(s), room)
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self):
        return "".join(self.parts)


class Worker:
    def __init__(self, config: dict):
        self.stage = config["stage"]
        self.student_dir = config["student_dir"]
        self.starter_dir = config.get("starter_dir")
        self.standins = config.get("standins", [])
        self.forbidden = config.get("forbidden", [])
        self.module = None
        self.guard = None
        self.probes = None
        self._standins = {}   # earlier stage -> (its stand-in module, its starter's path and text)
        self._fallbacks = {}  # earlier stage -> why the student's own module could not be used

    # -- loading ---------------------------------------------------------
    def _standin(self, name: str) -> None:
        """Read what the stand-in of the earlier stage ``name`` is made of while the course
        folder still exists (before confinement): the torch-built stand-in and the starter."""
        standin = importlib.import_module(f"{__package__}.standins.{name}")
        starter = os.path.join(self.starter_dir or "", f"{name}.py")
        text = None
        if self.starter_dir and os.path.exists(starter):
            with open(starter, encoding="utf-8") as f:
                text = f.read()
        self._standins[name] = (standin, starter, text)

    def _earlier_module(self, name: str, path: str, text: str):
        """Execute ``text`` as the module ``name``; None and the reason if it raises."""
        module = types.ModuleType(name)
        module.__file__ = path
        sys.modules[name] = module
        try:
            exec(compile(text, path, "exec"), module.__dict__)
        except SyntaxError as exc:
            del sys.modules[name]
            return None, f"SyntaxError at line {exc.lineno}: {exc.msg}"
        except BaseException as exc:  # noqa: BLE001 - anything a module does at import time
            del sys.modules[name]
            return None, f"{type(exc).__name__}: {_safe_str(exc)[:300]}"
        return module, ""

    def _assemble_standins(self) -> None:
        """Each earlier stage this one imports (after confinement: it runs student code).

        It is the student's own module with only the contract names replaced by the
        stand-in's, so their helpers, constants and extra classes stay theirs while a
        mistake in the contract names is charged once, in its own stage. If their
        module cannot be imported, the starter's takes its place (course-provided code
        such as ``load_pretrained_bert`` is there) and the reason is kept for the
        message of any other name the stage imports from it."""
        for name, (standin, starter, starter_text) in self._standins.items():
            own = os.path.join(self.student_dir, f"{name}.py")
            module, why = None, f"there is no {name}.py in the submission"
            if os.path.exists(own):
                with open(own, encoding="utf-8", errors="replace") as f:
                    module, why = self._earlier_module(name, own, f.read())
            if module is None:
                self._fallbacks[name] = why
                module, _ = self._earlier_module(name, starter, starter_text or "")
                if module is None:
                    module = types.ModuleType(name)
                module.__getattr__ = _only_contract(name, why, standin.CONTRACT_NAMES)
            for attr in standin.CONTRACT_NAMES:
                setattr(module, attr, getattr(standin, attr))
            sys.modules[name] = module

    def prepare(self):
        """Course-provided parts, imported before the worker is confined (afterwards the
        grader's folder no longer exists for it): what the stand-ins of earlier stages are
        made of, and the stage's probes. Never the stand-in of the stage itself: a
        submission could hand it in as its own."""
        for name in self.standins:
            self._standin(name)
        self.probes = _optional_module(f"{__package__}.probes.{self.stage}")

    def load(self):
        sys.path.insert(0, self.student_dir)
        self.guard = forbid.install(self.student_dir, self.forbidden)
        path = os.path.join(self.student_dir, f"{self.stage}.py")
        if not os.path.exists(path):
            return {"ok": False, "kind": "missing", "message": f"{self.stage}.py is not in the submission"}
        self._assemble_standins()
        try:
            self.module = importlib.import_module(self.stage)
        except SyntaxError as exc:
            return {"ok": False, "kind": "load_error", "type": "SyntaxError",
                    "message": f"{self.stage}.py line {exc.lineno}: {exc.msg}"}
        except ImportError as exc:
            failure = self._failure("load_error", exc)
            if exc.name in self._fallbacks:  # a name of theirs from an earlier stage that could not be imported
                failure["message"] = (
                    f"{self.stage}.py imports {_imported_name(exc)!r} from {exc.name}, but your {exc.name}.py could "
                    f"not be used ({self._fallbacks[exc.name]}). While {self.stage} is graded, {exc.name} is the "
                    f"course's stand-in, which has only the contract names "
                    f"({', '.join(self._standins[exc.name][0].CONTRACT_NAMES)}). Fix {exc.name}.py, or define "
                    f"what you need in {self.stage}.py.")
            return failure
        except BaseException as exc:  # noqa: BLE001 - anything a module does at import time
            return self._failure("load_error", exc)
        names = sorted(n for n in vars(self.module) if not n.startswith("_"))
        return {"ok": True, "value": names}

    # -- serving ---------------------------------------------------------
    def _target(self, name):
        if self.module is None:
            raise LookupError("the module is not loaded")
        if not hasattr(self.module, name):
            return None
        return getattr(self.module, name)

    def handle(self, req: dict) -> dict:
        op = req.get("op")
        if op == "load":
            return self.load()
        if op in ("call", "time_call"):
            fn = self._target(req["name"])
            if fn is None:
                return {"ok": False, "kind": "missing", "message": f"{self.stage}.{req['name']} is not defined"}
            args, kwargs = req.get("args", []), req.get("kwargs", {})
            if op == "call":
                return self._run(lambda: fn(*args, **kwargs))
            return self._run(lambda: _best_time(fn, args, kwargs, req.get("repeat", 3)))
        if op == "probe":
            probe = getattr(self.probes, req["name"], None) if self.probes else None
            if probe is None:
                return {"ok": False, "kind": "grader", "message": f"no probe {req['name']!r} for {self.stage}"}
            return self._run(lambda: probe(self.module, **req.get("kwargs", {})))
        return {"ok": False, "kind": "grader", "message": f"unknown op {op!r}"}

    def _run(self, thunk) -> dict:
        try:
            value = thunk()
        except BaseException as exc:  # noqa: BLE001 - student code may raise anything, even SystemExit
            return self._failure("error", exc)
        return {"ok": True, "value": value}

    def _failure(self, kind, exc) -> dict:
        if isinstance(exc, ForbiddenCall):
            kind = "forbidden"
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if self.guard is None or self.guard.is_student_file(f.filename)]
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        reply = {
            "ok": False, "kind": kind, "type": type(exc).__name__,
            "mro": [c.__name__ for c in type(exc).__mro__],
            "message": _safe_str(exc)[:2000], "where": where,
            "traceback": "".join(traceback.format_list(frames[-5:]))[-4000:],
        }
        if isinstance(exc, ImportError) and isinstance(exc.name, str) and exc.name:
            reply["import"] = self._import_failure(exc)
        return reply

    def _import_failure(self, exc: ImportError) -> dict:
        """What the trusted side needs to tell the grader's environment failing from a student's
        import (:func:`grader.engine.worker_client.grader_import_failure`): the module, whether it
        is a student's (a stage module ``aNN_*`` or a file of the submission), whose code tried
        to import it (the innermost frame that is the submission's or the course's: probes,
        stand-ins, starter code), and whether this worker can find it now."""
        name = exc.name
        top = name.split(".")[0]
        student = bool(_STAGE_MODULE.fullmatch(top)) or any(
            os.path.exists(os.path.join(self.student_dir, top + end)) for end in (".py", ""))
        course = [_SANDBOX, *([os.path.realpath(self.starter_dir)] if self.starter_dir else [])]
        by = "course"
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if self.guard is not None and self.guard.is_student_file(frame.filename):
                by = "student"
                break
            real = os.path.realpath(frame.filename or "")
            if real == _IMPORT_GUARD:  # forbid's __import__ passes a student's import through
                continue
            if any(real.startswith(c + os.sep) for c in course):
                break
        try:
            found_here = importlib.util.find_spec(name) is not None
        except BaseException:  # noqa: BLE001 - a parent that cannot be imported either
            found_here = False
        return {"module": name, "not_found": isinstance(exc, ModuleNotFoundError),
                "student_module": student, "by": by, "found_here": found_here}


def _only_contract(name: str, why: str, contract):
    """``__getattr__`` of an earlier stage's stand-in when the student's own module could not be used."""
    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(f"module {name!r} has no attribute {attr!r}: your {name}.py could not be used ({why}), "
                             f"so it is the course's stand-in, with only {', '.join(contract)}")
    return __getattr__


def _imported_name(exc: ImportError) -> str:
    """The name in ``cannot import name 'x' from 'module'``."""
    text = _safe_str(exc)
    return text.split("'")[1] if text.startswith("cannot import name '") else "a name"


def _optional_module(name: str):
    """The module ``name``, or None if it or its package does not exist (an import
    failing inside it still raises)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not (exc.name and (name == exc.name or name.startswith(exc.name + "."))):
            raise
        return None


def _best_time(fn, args, kwargs, repeat):
    best = float("inf")
    for _ in range(max(1, int(repeat))):
        start = time.perf_counter()
        fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best


def _safe_str(exc) -> str:
    try:
        return str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return type(exc).__name__


def serve(worker: Worker, in_fd: int, out_fd: int, config: dict) -> None:
    """Answer requests until the trusted side says exit or closes the pipe."""

    # Student prints go to a capped buffer; the C-level descriptors go nowhere.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    captured = CappedWriter()
    sys.stdout = sys.stderr = captured
    if config.get("library") == "torch":  # the fork server imported it, before any guard wraps its functions
        import torch
        torch.set_num_threads(int(config.get("torch_threads") or 1))

    protocol.write_message(out_fd, {"ok": True, "value": "ready"})
    while True:
        try:
            req = protocol.read_message(in_fd)
        except EOFError:
            return
        if req.get("op") == "exit":
            return
        if worker.guard:
            worker.guard.hits.clear()  # a forbidden call fails the request it happens in
        reply = worker.handle(req)
        reply["forbidden"] = list(worker.guard.hits) if worker.guard else []
        reply["output"] = captured.text()[-2000:]
        try:
            protocol.write_message(out_fd, reply)
        except (TypeError, ValueError) as exc:
            protocol.write_message(out_fd, {
                "ok": False, "kind": "bad_return", "type": type(exc).__name__,
                "message": f"the value returned cannot be checked: {exc}",
                "forbidden": reply["forbidden"], "output": reply["output"]})
