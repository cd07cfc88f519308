"""Forbidden APIs, enforced inside the worker while a stage's tests run.

A forbidden callable is replaced, wherever a loaded module refers to it, by a
wrapper that raises :class:`ForbiddenCall` when its immediate caller is a file
of the submission. Stand-ins and torch itself may still use it. A forbidden
module cannot be imported from a submission file. Every hit is also recorded,
so a submission that catches the exception still loses the test.
"""
from __future__ import annotations

import builtins
import functools
import importlib
import os
import sys


class ForbiddenCall(ImportError):
    """Raised when submission code uses an API its stage forbids."""


class Guard:
    def __init__(self, student_dir: str):
        self.student_dir = os.path.realpath(student_dir) + os.sep
        self.hits: list[str] = []

    def is_student_file(self, filename: str | None) -> bool:
        return bool(filename) and os.path.realpath(filename).startswith(self.student_dir)

    def _hit(self, name: str, frame) -> ForbiddenCall:
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        message = f"{where} uses {name}, which this stage forbids"
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

    def _wrap(self, dotted, original):
        guard = self

        @functools.wraps(original)
        def forbidden(*args, **kwargs):
            caller = sys._getframe(1)
            if guard.is_student_file(caller.f_code.co_filename):
                raise guard._hit(dotted, caller)
            return original(*args, **kwargs)

        del forbidden.__wrapped__  # do not hand the original back on a plate
        return forbidden

    def _forbid_class(self, dotted, cls) -> None:
        guard = self
        original_init = cls.__init__

        def __init__(obj, *args, **kwargs):
            caller = sys._getframe(1)
            if guard.is_student_file(caller.f_code.co_filename):
                raise guard._hit(dotted, caller)
            original_init(obj, *args, **kwargs)

        cls.__init__ = __init__

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
        if not names:
            return
        guard = self
        real_import = builtins.__import__

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and globals is not None and guard.is_student_file(globals.get("__file__")):
                for banned in names:
                    if name == banned or name.startswith(banned + "."):
                        raise guard._hit(f"the module {banned}", sys._getframe(1))
                    for item in fromlist or ():
                        if f"{name}.{item}" == banned:
                            raise guard._hit(f"the module {banned}", sys._getframe(1))
            return real_import(name, globals, locals, fromlist, level)

        builtins.__import__ = guarded_import


def install(student_dir: str, forbidden: list[str]) -> Guard:
    """Install the stage's forbidden list. An entry whose parent module is
    already imported and has it as a non-module attribute forbids that
    callable or class; any other entry forbids importing that module."""
    guard = Guard(student_dir)
    modules = []
    for dotted in forbidden:
        module_name, _, attr = dotted.rpartition(".")
        owner = sys.modules.get(module_name) if module_name else None
        if owner is not None and hasattr(owner, attr) and type(getattr(owner, attr)).__name__ != "module":
            guard.forbid_callable(dotted)
        else:
            modules.append(dotted)
    guard.forbid_modules(modules)
    return guard
