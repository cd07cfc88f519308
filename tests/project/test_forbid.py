"""grader.sandbox.forbid: inside a worker, the stage's forbidden APIs fail for the submission's files only.

The guard rewires the interpreter (module attributes, ``builtins.__import__``), so each case runs in a
Python of its own, as a worker is.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

STUDENT = textwrap.dedent('''\
    import numpy as np

    def call_norm():
        return np.linalg.norm([1.0])

    def make_decoder():
        import json
        return json.JSONDecoder()

    def import_wave():
        import wave

    def from_email():
        from email import mime

    def call_and_catch():
        try:
            np.linalg.norm([1.0])
        except Exception:
            return "caught"
''')

WORKER = textwrap.dedent('''\
    import json, sys
    import numpy, numpy.linalg
    from numpy.linalg import norm as early_norm   # held before the guard, by a file that is not the student's
    from grader.sandbox import forbid

    guard = forbid.install(sys.argv[1], ["numpy.linalg.norm", "json.JSONDecoder", "wave", "email.mime"])
    sys.path.insert(0, sys.argv[1])
    import sub
    out = {}
    for name in ("call_norm", "make_decoder", "import_wave", "from_email", "call_and_catch"):
        try:
            out[name] = repr(getattr(sub, name)())
        except forbid.ForbiddenCall as exc:
            out[name] = "forbidden: " + str(exc)
    out["hits"] = guard.hits
    out["trusted_call"] = float(numpy.linalg.norm([3.0, 4.0]))
    out["trusted_class"] = json.JSONDecoder().decode("[1]")
    import wave
    out["early_reference_guarded"] = early_norm is numpy.linalg.norm
    out["original_hidden"] = not hasattr(numpy.linalg.norm, "__wrapped__")
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    student = tmp_path_factory.mktemp("student")
    (student / "sub.py").write_text(STUDENT)
    script = student.parent / "worker.py"
    script.write_text(WORKER)
    done = subprocess.run([sys.executable, str(script), str(student)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_forbidden_callable_fails_in_the_students_file_and_says_where(worker):
    assert worker["call_norm"] == "forbidden: sub.py:4 uses numpy.linalg.norm, which this stage forbids"


def test_a_forbidden_class_cannot_be_made_by_the_student(worker):
    assert worker["make_decoder"] == "forbidden: sub.py:8 uses json.JSONDecoder, which this stage forbids"


def test_a_forbidden_module_cannot_be_imported_by_the_student(worker):
    assert worker["import_wave"].startswith("forbidden: sub.py:11 uses the module wave")
    assert worker["from_email"].startswith("forbidden: sub.py:14 uses the module email.mime")


def test_a_caught_forbidden_call_is_still_recorded(worker):
    assert worker["call_and_catch"] == "'caught'"
    assert "sub.py:18 uses numpy.linalg.norm, which this stage forbids" in worker["hits"]
    assert len(worker["hits"]) == len(set(worker["hits"])) == 5


def test_the_graders_own_files_still_use_them(worker):
    """Stand-ins, probes and libraries call what the stage forbids the student (not the wrapper's original)."""
    assert worker["trusted_call"] == 5.0 and worker["trusted_class"] == [1]
    assert worker["early_reference_guarded"], "a reference taken before the guard is guarded too"
    assert worker["original_hidden"], "the wrapper does not hand the original back"


# ---------------------------------------------------------------- what Python cannot undo (issue 33)

LAYERED_STUDENT = textwrap.dedent('''\
    import collections, dataclasses, gc, os, sys, warnings
    import torch
    import torch.nn.functional as F

    q = torch.randn(1, 2, 3, 4)

    def walk_frames():
        return sys._getframe(0).f_lineno

    def read_gc():
        return len(gc.get_objects())

    def run_code():
        exec("1")

    def unpickle_a_name():
        import pickle
        return pickle.loads(b"cos\\ngetcwd\\n.")

    def warn_and_define():
        warnings.warn("a library walks the stack for this")
        Point = collections.namedtuple("Point", "x y")
        return dataclasses.make_dataclass("Pair", ["a", "b"])(1, Point(2, 3)).a

    def make_folders(path):
        os.makedirs(os.path.join(path, "a", "b"))

    def closure_original():
        cells = F.scaled_dot_product_attention.__closure__
        original = next(c.cell_contents for c in cells if callable(c.cell_contents))
        return original(q, q, q)

    def ops_call():
        return torch.ops.aten.scaled_dot_product_attention(q, q, q)

    def inference_mode_binding():
        with torch.inference_mode():
            return torch._C._nn.scaled_dot_product_attention(q, q, q)

    def import_grader_late():
        import importlib
        return importlib.import_module("grader.engine.report")
''')

LAYERED_WORKER = textwrap.dedent('''\
    import json, os, sys, tempfile, warnings
    import torch
    import torch.nn.functional as F
    from grader.sandbox import forbid

    warnings.simplefilter("ignore")
    q = torch.randn(1, 2, 3, 4)
    before = F.scaled_dot_product_attention(q, q, q)
    guard = forbid.install(sys.argv[1], ["torch.nn.functional.scaled_dot_product_attention", "os.mkdir"])
    sys.path.insert(0, sys.argv[1])
    import layered
    out = {}
    for name in ("walk_frames", "read_gc", "run_code", "unpickle_a_name", "warn_and_define", "closure_original",
                 "ops_call", "inference_mode_binding", "import_grader_late"):
        try:
            value = getattr(layered, name)()
            out[name] = value if isinstance(value, (int, str)) else type(value).__name__
        except forbid.ForbiddenCall as exc:
            out[name] = "forbidden: " + str(exc)
    try:
        layered.make_folders(tempfile.mkdtemp())
        out["make_folders"] = "made"
    except forbid.ForbiddenCall as exc:
        out["make_folders"] = "forbidden: " + str(exc)
    after = F.scaled_dot_product_attention(q, q, q)  # course code: torch's own kernel
    out["course_result_unchanged"] = bool(torch.equal(before, after))
    with torch.inference_mode():
        out["course_inference_mode"] = bool(torch.equal(torch._C._nn.scaled_dot_product_attention(q, q, q), before))
    out["frames_here"] = sys._getframe(0).f_lineno > 0  # the worker's own code may
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    student = tmp_path_factory.mktemp("layered")
    (student / "layered.py").write_text(LAYERED_STUDENT)
    script = student.parent / "layered_worker.py"
    script.write_text(LAYERED_WORKER)
    done = subprocess.run([sys.executable, str(script), str(student)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name, line, what", [
    ("walk_frames", 8, "sys._getframe"), ("read_gc", 11, "gc.get_objects"), ("run_code", 14, "compile"),
    ("unpickle_a_name", 18, "pickle")])
def test_the_audit_hook_refuses_reaching_around_from_the_students_own_lines(layered, name, line, what):
    assert layered[name].startswith(f"forbidden: layered.py:{line} uses {what}"), layered[name]
    assert "reaches around the grader's rules" in layered[name]


def test_libraries_may_do_on_the_students_behalf_what_the_student_may_not(layered):
    """warnings walks the stack, namedtuple and dataclasses run generated code: from a library's frame."""
    assert layered["warn_and_define"] == 1 and layered["frames_here"]


def test_a_forbidden_call_made_by_a_library_for_the_student_is_the_students(layered):
    """os.makedirs calls the forbidden os.mkdir: the nearest frame outside the libraries is the student's."""
    assert layered["make_folders"].startswith("forbidden: layered.py:26 uses os.mkdir"), layered["make_folders"]


@pytest.mark.parametrize("name, line", [("closure_original", 31), ("ops_call", 34), ("inference_mode_binding", 38)])
def test_the_original_operator_is_refused_in_torchs_dispatcher(layered, name, line):
    """Taken out of the Python guard's closure, called through torch.ops or the C binding (even under
    inference_mode, which skips the autograd key): the dispatch table holds our kernel."""
    expected = f"forbidden: layered.py:{line} uses torch.nn.functional.scaled_dot_product_attention"
    assert layered[name].startswith(expected), layered[name]


def test_course_code_still_gets_torchs_own_kernel(layered):
    assert layered["course_result_unchanged"] and layered["course_inference_mode"]


def test_importing_the_grader_is_refused_even_through_importlib(layered):
    assert layered["import_grader_late"].startswith("forbidden: layered.py:42 uses the module grader")
