"""The worker: imports one stage of a submission and serves calls on it.

Runs in a child of the fork server (:mod:`forkserver`), after it is confined,
with two pipe descriptors (requests in, replies out). Everything it receives and
sends goes through :mod:`protocol` (JSON + .npy, never pickle). Student output
on stdout/stderr is captured and capped; it never reaches the protocol pipe.

Requests (dicts):
  {"op": "load"}                          import the stage module (after stand-ins and guards)
  {"op": "call", "name", "args", "kwargs"}   call a module attribute
  {"op": "call", ..., "dry": True, "like": protocol.shape_of(the call's value)}
                                         everything a call does but the call itself (in the control worker,
                                         which holds no submission: the baseline of a call's CPU time); its
                                         value is zeros of the shape and dtype of the call's result ("like"),
                                         so returning it costs what returning the result did
  {"op": "probe", "name", "kwargs"}      run probes/<stage>.py::<name>(module, **kwargs)
  {"op": "import", "module"}             import a module (in a control worker, with no submission loaded)
Replies: {"ok": True, "value": ..., "after": {"args", "kwargs"}, "names": [...], "forbidden": [...]} or a
         ``protocol.failure`` whose kind is a ``protocol.ReplyKind``; a failure that is an ImportError also
         carries "import" (:meth:`Worker._import_failure`). ``after`` holds the arguments as they are after
         the call (those of ``protocol.echoed``: a probe's weights are not sent back), sent back through the
         same encoder as the value: the trusted side compares them with what it sent (nothing here judges
         them); ``names``: the parameters the positional arguments fill.
Nothing in a reply is believed about how the code ran: times are read from outside (the worker's CPU clock),
and what was forbidden is also read from the source (docs/TRUST.md).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import io
import os
import re
import sys
import traceback
import types

from . import forbid, protocol
from .forbid import ForbiddenCall
from .protocol import ReplyKind, failure

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
        self.earlier = config.get("earlier", [])  # [{"stage", "own"}]: each earlier stage, in course order
        self.forbidden = config.get("forbidden", [])
        self.module = None
        self.guard = None
        self.probes = None
        self._course = {}     # earlier stage -> (its stand-in, None if the student's own is used; starter path, text)
        self._fallbacks = {}  # stood-in earlier stage -> why the student's own module could not be used

    # -- loading ---------------------------------------------------------
    def _read_course(self, name: str, own: bool) -> None:
        """Read what the course has for the earlier stage ``name`` while the course folder still exists
        (before confinement): its starter (course-provided code) and, unless the student's own module is
        used, the torch-built stand-in."""
        standin = None if own else importlib.import_module(f"{__package__}.standins.{name}")
        starter = os.path.join(self.starter_dir or "", f"{name}.py")
        text = None
        if self.starter_dir and os.path.exists(starter):
            with open(starter, encoding="utf-8") as f:
                text = f.read()
        self._course[name] = (standin, starter, text)

    def _earlier_module(self, name: str, path: str, text: str):
        """Execute ``text`` as the module ``name`` (registered under that name); None and the reason if it raises."""
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

    def _course_module(self, name: str, contract: dict):
        """The earlier stage's starter executed as a module of its own (its course-provided code then
        works on ``contract``, the names set on it), leaving ``sys.modules[name]`` as it was."""
        _standin, starter, text = self._course[name]
        before = sys.modules.get(name)
        course, _ = self._earlier_module(name, starter, text or "")
        course = course or types.ModuleType(name)
        for attr, value in contract.items():
            setattr(course, attr, value)
        if before is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = before
        return course

    def _assemble_earlier(self) -> None:
        """The earlier stages this one imports, in course order (after confinement: it runs student code).

        One that scored full marks is the student's own module, imported from the submission as they wrote
        it; only course-provided code it lacks (what the starter gives complete, such as
        ``load_pretrained_bert``, which probes call) is added from the starter. One that did not is stood
        in: the student's own module with its contract names replaced by the stand-in's and its
        course-provided code by the starter's, so that everything the contract and the course define is the
        course's own while the student's helpers, constants and extra classes stay theirs. If their module
        cannot be imported, the course's module takes its place and the reason is kept for the message of
        any other name the stage imports from it."""
        for name, (standin, _starter, text) in self._course.items():
            provided = _course_provided(text or "")
            if standin is None:
                try:
                    module = importlib.import_module(name)
                except BaseException:  # noqa: BLE001 - the stage's own import of it says why, as their error
                    continue
                lacking = [attr for attr in provided if not hasattr(module, attr)]
                if lacking:
                    course = self._course_module(name, {})
                    for attr in lacking:
                        setattr(module, attr, getattr(course, attr))
                continue
            course = self._course_module(name, {attr: getattr(standin, attr) for attr in standin.CONTRACT_NAMES})
            own = os.path.join(self.student_dir, f"{name}.py")
            module, why = None, f"there is no {name}.py in the submission"
            if os.path.exists(own):
                with open(own, encoding="utf-8", errors="replace") as f:
                    module, why = self._earlier_module(name, own, f.read())
            if module is None:
                self._fallbacks[name] = why
                module = course
                module.__getattr__ = _only_contract(name, why, standin.CONTRACT_NAMES)
            else:
                for attr in [*standin.CONTRACT_NAMES, *provided]:
                    if hasattr(course, attr):
                        setattr(module, attr, getattr(course, attr))
            sys.modules[name] = module

    def prepare(self):
        """Course-provided parts, imported before the worker is confined (afterwards the
        grader's folder no longer exists for it): the starters of earlier stages and the stand-ins of
        those that are stood in, and the stage's probes. Never the stand-in of the stage itself: a
        submission could hand it in as its own."""
        for earlier in self.earlier:
            self._read_course(earlier["stage"], earlier["own"])
        self.probes = _optional_module(f"{__package__}.probes.{self.stage}")

    def load(self):
        sys.path.insert(0, self.student_dir)
        self.guard = forbid.install(self.student_dir, self.forbidden, course_dirs=[self.starter_dir or _SANDBOX])
        path = os.path.join(self.student_dir, f"{self.stage}.py")
        if not os.path.exists(path):
            return failure(ReplyKind.MISSING, f"{self.stage}.py is not in the submission")
        self._assemble_earlier()
        try:
            self.module = importlib.import_module(self.stage)
        except SyntaxError as exc:
            return failure(ReplyKind.LOAD_ERROR, f"{self.stage}.py line {exc.lineno}: {exc.msg}", type="SyntaxError")
        except ImportError as exc:
            reply = self._failure(ReplyKind.LOAD_ERROR, exc)
            if exc.name in self._fallbacks:  # a name of theirs from an earlier stage that could not be imported
                reply["message"] = (
                    f"{self.stage}.py imports {_imported_name(exc)!r} from {exc.name}, but your {exc.name}.py could "
                    f"not be used ({self._fallbacks[exc.name]}). While {self.stage} is graded, {exc.name} is the "
                    f"course's stand-in, which has only the contract names "
                    f"({', '.join(self._course[exc.name][0].CONTRACT_NAMES)}). Fix {exc.name}.py, or define "
                    f"what you need in {self.stage}.py.")
            return reply
        except BaseException as exc:  # noqa: BLE001 - anything a module does at import time
            return self._failure(ReplyKind.LOAD_ERROR, exc)
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
        if op == "call" and req.get("dry"):  # in the control worker, which holds no submission
            return self._run_returning_arguments(lambda: protocol.like_value(req.get("like")), req, [])
        if op == "call":
            fn = self._target(req["name"])
            if fn is None:
                return failure(ReplyKind.MISSING, f"{self.stage}.{req['name']} is not defined")
            args, kwargs = req.get("args", []), req.get("kwargs", {})
            return self._run_returning_arguments(lambda: fn(*args, **kwargs), req, _parameter_names(fn, args))
        if op == "import":  # a control worker, which holds none of the submission's code
            return self._run(lambda: importlib.import_module(req["module"]) and None)
        if op == "probe":
            probe = getattr(self.probes, req["name"], None) if self.probes else None
            if probe is None:
                return failure(ReplyKind.GRADER, f"no probe {req['name']!r} for {self.stage}")
            return self._run_returning_arguments(lambda: probe(self.module, **req.get("kwargs", {})), req, [])
        return failure(ReplyKind.GRADER, f"unknown op {op!r}")

    def _run_returning_arguments(self, thunk, req: dict, names: list) -> dict:
        """``_run``, with the request's arguments as the call left them (``after``: those of
        ``protocol.echoed``), for the trusted side to compare with what it sent
        (``testing.assert_inputs_unchanged``)."""
        reply = self._run(thunk)
        if reply["ok"]:
            reply["after"] = protocol.echoed(req)
            reply["names"] = names
        return reply

    def _run(self, thunk) -> dict:
        try:
            value = thunk()
        except BaseException as exc:  # noqa: BLE001 - student code may raise anything, even SystemExit
            return self._failure(ReplyKind.ERROR, exc)
        return {"ok": True, "value": value}

    def _failure(self, kind: ReplyKind, exc) -> dict:
        if isinstance(exc, ForbiddenCall):
            kind = ReplyKind.FORBIDDEN
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if self.guard is None or self.guard.is_student_file(f.filename)]
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        reply = failure(kind, _safe_str(exc)[:2000], type=type(exc).__name__,
                        mro=[c.__name__ for c in type(exc).__mro__], where=where,
                        traceback="".join(traceback.format_list(frames[-5:]))[-4000:])
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


def _parameter_names(fn, args: list) -> list:
    """The names of the parameters that ``args`` fill (by position), where the signature says."""
    try:
        bound = inspect.signature(fn).bind_partial(*args)
    except (TypeError, ValueError):
        return []
    return list(bound.arguments)[:len(args)]


def _course_provided(starter_text: str) -> list:
    """The functions and classes a starter gives complete (no ``raise NotImplementedError`` in them):
    course-provided code such as ``load_pretrained_bert``."""
    try:
        tree = ast.parse(starter_text)
    except SyntaxError:
        return []

    def stub(node):
        raised = (getattr(n.exc, "id", None) or getattr(getattr(n.exc, "func", None), "id", None)
                  for n in ast.walk(node) if isinstance(n, ast.Raise) and n.exc is not None)
        return "NotImplementedError" in raised
    return [n.name for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not stub(n)]


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


def _safe_str(exc) -> str:
    try:
        return str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return type(exc).__name__


def _unsendable(reply: dict, exc: Exception) -> dict:
    """The reply when it cannot be encoded: the value is not an array, tensor, number ... (the student's
    failure), or an argument now holds something that cannot be sent (then the value goes back, and the
    trusted side says which argument changed)."""
    try:
        protocol.encode(reply["value"])
    except (TypeError, ValueError):
        return failure(ReplyKind.BAD_RETURN, f"the value returned cannot be checked: {exc}", type=type(exc).__name__,
                       forbidden=reply["forbidden"], output=reply["output"])
    return {**reply, "after": {"unsendable": f"{type(exc).__name__}: {exc}"[:300]}}


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
            protocol.write_message(out_fd, _unsendable(reply, exc))
