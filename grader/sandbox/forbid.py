"""Forbidden APIs and reaching around the grader, refused inside the worker while a stage runs.

Three layers, each holding where the one before it could be undone by Python:

1. **Python guards.** Every forbidden callable is replaced, wherever a loaded module refers to it, by a
   wrapper that raises :class:`ForbiddenCall` when the call comes from the submission: the nearest frame
   outside the libraries (the standard library, site-packages) is a submission file. A forbidden class
   cannot be made from there, and a forbidden module cannot be imported from there. Course code (stand-ins,
   probes, starter code) still uses them, and so does torch on its behalf.
2. **torch's dispatcher.** A forbidden torch operator (:data:`DISPATCHER_OPS`) gets a kernel of ours in the
   C++ dispatch table, so that calling the original binding (taken out of a wrapper's closure, say) still
   meets the same check. Python can change that table only through ``torch.library`` or ``torch._C``, and
   reach our registration only through the garbage collector or frames: reaching around (3).
3. **An audit hook** (:func:`sys.addaudithook`; nothing can remove it). The submission's own code may not
   walk frames, read the garbage collector, call through ctypes, compile or execute code, build functions or
   code objects, replace a function's code, trace, unpickle names, or import the grader's modules or a
   forbidden module. Such a call raises at once.

Every hit is recorded, so a submission that catches the exception still loses the test. The trusted side
reads the source too (:mod:`grader.engine.static_check`), where a rewritten worker cannot hide anything.
"""
from __future__ import annotations

import builtins
import functools
import importlib
import os
import sys
import sysconfig
import threading

# A forbidden torch function whose operator is refused in the dispatcher too -> its aten name. Course code
# that calls it gets torch's own kernel back (``decompose`` runs the composite kernel we override).
DISPATCHER_OPS = {"torch.nn.functional.scaled_dot_product_attention": "scaled_dot_product_attention"}
DISPATCH_KEYS = ("AutogradCPU", "CPU")  # CPU too: under inference_mode the autograd key is skipped

# Audit events the submission's own code may not raise (its frame is the innermost): reaching around.
REACH_AROUND_EVENTS = {
    "sys._getframe": "sys._getframe (walking the call stack)",
    "sys._current_frames": "sys._current_frames (walking the call stack)",
    "sys.settrace": "sys.settrace", "sys.setprofile": "sys.setprofile",
    "gc.get_objects": "gc.get_objects", "gc.get_referrers": "gc.get_referrers",
    "gc.get_referents": "gc.get_referents",
    "compile": "compile (building code at run time)", "exec": "exec/eval (running code built at run time)",
    "function.__new__": "types.FunctionType (building a function)",
    "code.__new__": "types.CodeType (building code)",
    "pickle.find_class": "pickle (looking names up at run time)",
    "marshal.loads": "marshal (loading code)",
}
REACH_AROUND_PREFIXES = {"ctypes.": "ctypes (reaching into memory)"}
RESTRICTED_ATTRIBUTE_EVENTS = ("object.__getattr__", "object.__setattr__", "object.__delattr__")
GRADER_PACKAGE = __name__.split(".")[0]

_LIBRARIES = tuple(sorted({os.path.realpath(p) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")
                           if (p := sysconfig.get_paths().get(key))}))
_COURSE = (os.path.dirname(os.path.realpath(__file__)) + os.sep,)
_IMPORTLIB = os.path.dirname(importlib.__file__)


def _is_import_machinery(filename: str) -> bool:
    return filename.startswith("<frozen importlib") or os.path.dirname(filename) == _IMPORTLIB


class ForbiddenCall(ImportError):
    """Raised when submission code uses an API its stage forbids, or reaches around the grader."""


class Guard:
    def __init__(self, student_dir: str, course_dirs=()):
        self.student_dir = os.path.realpath(student_dir) + os.sep
        self.course = _COURSE + tuple(os.path.realpath(d) + os.sep for d in course_dirs)
        self.hits: list[str] = []
        self._kinds: dict[str, str] = {}
        self._modules = [GRADER_PACKAGE]  # modules the submission may not import (forbid_modules adds the stage's)
        self._busy = threading.local()  # the audit hook's own frame walk raises audit events too

    # -- whose code is running -------------------------------------------
    def kind_of(self, filename: str | None) -> str:
        """"student", "course" or "library" for a code object's file name. A name that is not a real path
        (``<string>``: code built at run time) counts as the student's; ``<frozen ...>`` is Python's own."""
        known = self._kinds.get(filename or "")
        if known is None:
            known = self._kinds[filename or ""] = self._classify(filename or "")
        return known

    def _classify(self, filename: str) -> str:
        if filename.startswith("<frozen "):
            return "library"
        if not os.path.isabs(filename):
            return "student"
        real = os.path.realpath(filename)
        if real.startswith(self.student_dir):
            return "student"
        if real.startswith(self.course):
            return "course"
        return "library" if real.startswith(_LIBRARIES) else "course"

    def is_student_file(self, filename: str | None) -> bool:
        return self.kind_of(filename) == "student"

    def caller(self, frame=None):
        """The nearest frame from ``frame`` (default: the caller's caller) that is not a library's, if it is
        the student's; None if it is course code."""
        frame = frame or sys._getframe(2)
        while frame is not None:
            kind = self.kind_of(frame.f_code.co_filename)
            if kind != "library":
                return frame if kind == "student" else None
            frame = frame.f_back
        return None

    def _hit(self, name: str, frame, why: str = "which this stage forbids") -> ForbiddenCall:
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        message = f"{where} uses {name}, {why}"
        if message not in self.hits:
            self.hits.append(message)
        return ForbiddenCall(message)

    # -- callables -------------------------------------------------------
    def forbid_callable(self, dotted: str) -> None:
        module_name, _, attr = dotted.rpartition(".")
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            return  # the library is absent, so nobody can call it
        original = getattr(owner, attr, None)
        if original is None:
            return
        if isinstance(original, type):
            self._forbid_class(dotted, original)
        else:
            self._replace_everywhere(original, self._wrap(dotted, original))
        if dotted in DISPATCHER_OPS:
            self._forbid_operator(dotted, DISPATCHER_OPS[dotted])

    def _wrap(self, dotted, original):
        guard = self

        @functools.wraps(original)
        def forbidden(*args, **kwargs):
            student = guard.caller()
            if student is not None:
                raise guard._hit(dotted, student)
            return original(*args, **kwargs)

        del forbidden.__wrapped__  # do not hand the original back on a plate
        return forbidden

    def _forbid_class(self, dotted, cls) -> None:
        guard = self
        original_init = cls.__init__

        def __init__(obj, *args, **kwargs):
            student = guard.caller()
            if student is not None:
                raise guard._hit(dotted, student)
            original_init(obj, *args, **kwargs)

        cls.__init__ = __init__

    def _forbid_operator(self, dotted: str, op_name: str) -> None:
        """Our kernel for ``aten::op_name`` in the dispatcher: the submission's calls raise, others run the
        operator's own composite kernel."""
        import warnings

        import torch  # fork-safety: only in a torch stage's worker, where the fork server imported it
        op = getattr(torch.ops.aten, op_name).default
        guard = self

        def kernel(*args, **kwargs):
            student = guard.caller()
            if student is not None:
                raise guard._hit(dotted, student)
            return op.decompose(*args, **kwargs)

        self._library = torch.library.Library("aten", "IMPL")  # kept: the registration lives as long as it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
            for key in DISPATCH_KEYS:
                self._library.impl(op_name, kernel, key)

    @staticmethod
    def _replace_everywhere(original, replacement) -> None:
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for key, value in list(namespace.items()):
                if value is original:
                    try:
                        setattr(module, key, replacement)
                    except (AttributeError, TypeError):
                        pass

    # -- modules ---------------------------------------------------------
    def forbid_modules(self, names: list[str]) -> None:
        """The submission may not import ``names`` (nor the grader): not with an import statement or
        ``__import__`` (this guard), nor with ``importlib.import_module`` (which raises no audit event for the
        module it is asked for), nor any other way that loads a module (the audit hook)."""
        guard = self
        real_import, real_import_module = builtins.__import__, importlib.import_module
        names = self._modules = [*names, GRADER_PACKAGE]

        def refuse(name, frame):
            for banned in names:
                if name == banned or name.startswith(banned + "."):
                    raise guard._hit(f"the module {banned}", frame)

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and globals is not None and guard.is_student_file(globals.get("__file__")):
                for item in [None, *(fromlist or ())]:
                    refuse(name if item is None else f"{name}.{item}", sys._getframe(1))
            return real_import(name, globals, locals, fromlist, level)

        @functools.wraps(real_import_module)
        def guarded_import_module(name, package=None):
            student = guard.caller()
            if student is not None and isinstance(name, str) and not name.startswith("."):
                refuse(name, student)
            return real_import_module(name, package)

        del guarded_import_module.__wrapped__
        builtins.__import__ = guarded_import
        importlib.import_module = guarded_import_module

    # -- the audit hook ----------------------------------------------------
    def audit(self, event: str, args: tuple) -> None:
        """Called by Python for every audited event in this process, from now until it exits."""
        what = REACH_AROUND_EVENTS.get(event)
        if what is None and event.startswith("ctypes."):
            what = REACH_AROUND_PREFIXES["ctypes."]
        if what is None and event in RESTRICTED_ATTRIBUTE_EVENTS:
            what = f"the attribute {args[1]}" if len(args) > 1 else "a restricted attribute"
        if what is None and event != "import":
            return
        if getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            try:
                frame = sys._getframe(1)  # the frame whose operation raised the event
            except ValueError:
                return
            if event == "import":
                self._audit_import(args[0], frame)
            elif self.is_student_file(frame.f_code.co_filename):
                raise self._hit(what, frame, "which reaches around the grader's rules")
        finally:
            self._busy.on = False

    def _audit_import(self, name, frame) -> None:
        """An import being carried out (not one already done): refused when the submission's code asked for
        a forbidden module or the grader's own, however it asked (``__import__``, importlib, ...). Who asked is
        the first frame outside Python's import machinery, so a library importing what it needs is not."""
        banned = next((b for b in self._modules
                       if isinstance(name, str) and (name == b or name.startswith(b + "."))), None)
        while banned is not None and frame is not None and _is_import_machinery(frame.f_code.co_filename):
            frame = frame.f_back
        if banned is not None and frame is not None and self.is_student_file(frame.f_code.co_filename):
            raise self._hit(f"the module {banned}", frame)


def install(student_dir: str, forbidden: list[str], course_dirs=()) -> Guard:
    """Install the stage's forbidden list and the audit hook. An entry whose parent module is already
    imported and has it as a non-module attribute forbids that callable or class; any other entry forbids
    importing that module. ``course_dirs``: folders of course code besides the sandbox (the starter)."""
    guard = Guard(student_dir, course_dirs)
    modules = []
    for dotted in forbidden:
        module_name, _, attr = dotted.rpartition(".")
        owner = sys.modules.get(module_name) if module_name else None
        if owner is not None and hasattr(owner, attr) and type(getattr(owner, attr)).__name__ != "module":
            guard.forbid_callable(dotted)
        else:
            modules.append(dotted)
    guard.forbid_modules(modules)
    sys.addaudithook(guard.audit)
    return guard
