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
