"""grader.engine.static_check: the forbidden APIs a submission's source names, found without running it."""
from __future__ import annotations

import pytest

from grader.engine.static_check import imported_files, reach_arounds, scan

FORBIDDEN = ["torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention", "scipy.special"]


def _lines(source: str, forbidden=FORBIDDEN) -> list:
    return scan(source, "a05_encoder.py", forbidden)


def test_an_alias_is_followed_to_the_forbidden_name():
    hits = _lines("import torch.nn.functional as F\n\ndef f(q, k, v):\n"
                  "    return F.scaled_dot_product_attention(q, k, v)\n")
    assert hits == ["a05_encoder.py:4 uses torch.nn.functional.scaled_dot_product_attention, which this stage forbids"]


def test_imports_of_forbidden_names_and_modules_are_hits():
    source = ("from torch.nn import MultiheadAttention as MHA\nimport scipy.special\nfrom scipy import special\n"
              "from scipy.special import softmax\n")
    assert [h.split(" uses ")[0] for h in _lines(source)] == [f"a05_encoder.py:{n}" for n in (1, 2, 3, 4)]
    assert "uses torch.nn.MultiheadAttention" in _lines(source)[0]


def test_a_name_used_after_from_import_is_a_hit_on_its_line():
    source = "from torch.nn import MultiheadAttention\n\n\nlayer = MultiheadAttention(8, 2)\n"
    assert [h.split(" uses ")[0] for h in _lines(source)] == ["a05_encoder.py:1", "a05_encoder.py:4"]


def test_the_students_own_names_are_not_hits():
    """A method of the student's own with a forbidden API's last name, and a module of the same short name
    that is not the library's, are theirs."""
    source = ("import numpy as np\n\nclass Attention:\n    def scaled_dot_product_attention(self, q, k, v):\n"
              "        return np.dot(q, k)\n\n    def forward(self, q):\n"
              "        return self.scaled_dot_product_attention(q, q, q)\n\n"
              "def MultiheadAttention():\n    return None\n")
    assert _lines(source) == []


def test_a_prefix_is_not_a_match():
    """``scipy.special`` forbids its submodules, never ``scipy.specialised`` (a name that merely starts the same)."""
    assert _lines("import scipy.specialised\n") == []
    assert _lines("import scipy.special.cython_special\n") != []


def test_what_cannot_be_parsed_is_left_to_the_import_and_an_empty_list_forbids_nothing():
    assert _lines("def broken(:\n") == []
    assert _lines("import torch.nn.functional as F\nF.scaled_dot_product_attention\n", forbidden=[]) == []


def test_hits_are_in_line_order_and_unique():
    source = ("import torch.nn.functional as F\n" + "x = 1\n" * 8 + "F.scaled_dot_product_attention(1)\n"
              "F.scaled_dot_product_attention(2); F.scaled_dot_product_attention(3)\n")
    lines = [int(h.split(":")[1].split()[0]) for h in _lines(source)]
    assert lines == [10, 11]


# ---------------------------------------------------------------- reaching around (issue 33)

def _around(source: str, course: str | None = None) -> list:
    return [str(h) for h in reach_arounds(source, "a05_encoder.py", course)]


@pytest.mark.parametrize("line", [
    "import gc", "import ctypes", "import inspect", "from importlib import import_module", "import pickle",
    "import builtins", "import grader.sandbox.runtime", "from sys import modules", "import sys\nsys.modules",
    "import sys\nsys._getframe(1)", "f.__closure__", "f.__globals__", "f.__wrapped__", "g.gi_frame",
    "e.__traceback__.tb_frame", "frame.f_back", "exec('1')", "eval('1')", "compile('1', 'x', 'exec')",
    "__import__('os')", "globals()['x']", "vars(F)", "F.__dict__", "object.__subclasses__()",
    "import torch\ntorch._C._nn.scaled_dot_product_attention", "import torch\ntorch.ops.aten.mm",
    "import torch\ntorch.library.Library", "getattr(F, 'scaled' + name)", "getattr(f, '__closure__')",
    "functools.reduce(getattr, names, F)", "import operator\noperator.attrgetter('__clo' + 'sure__')",
    "import numpy.lib.format\nnumpy.lib.format.write_array = w", "type(x).numpy = f", "x.__class__.f = g",
    "import numpy as np\nsetattr(np, 'dot', f)", "import types\ntypes.FunctionType(c, {})", "['f_back']",
])
def test_each_way_around_the_rules_is_found_on_its_line(line):
    source = "import torch.nn.functional as F\nimport functools\n" + line + "\n"
    found = _around(source)
    last = source.count("\n")
    assert any(h.startswith(f"a05_encoder.py:{n} reaches around the grader's rules (") for n in range(3, last + 1)
               for h in found), (line, found)
    assert all("the stage is scored as if it used a forbidden API" in h for h in found)


@pytest.mark.parametrize("line", [
    "getattr(self, name)", "getattr(self.layers[i], name)", "setattr(self, f'w_{name}', nn.Linear(4, 4))",
    "for name in ('w_q', 'w_k'):\n    getattr(layer, name)", "getattr(layer, 'weight')", "hasattr(x, name)",
    "import functools\n@functools.wraps(f)\ndef g(*a):\n    return f(*a)", "import re\nre.compile('x')",
    "import torch\ntorch.compile", "import torch\ntorch.backends.cudnn.deterministic = True",
    "import types\ntypes.SimpleNamespace(a=1)", "import sys\nsys.version_info", "vars(self)", "self.__dict__",
    "model.weight = p", "import math\nmath.sqrt(2)", "'a docstring mentioning __closure__ and f_back'",
])
def test_correct_code_reaches_around_nothing(line):
    assert _around("import torch.nn as nn\n" + line + "\n") == []


def test_a_loop_variable_that_is_ever_reassigned_is_not_a_literal_name():
    source = "for name in ('a', 'b'):\n    name = name.upper()\n    getattr(obj, name)\n"
    assert _around(source)


def test_the_courses_own_lines_are_not_counted():
    """The starter's course-provided code (here its globals() line) is the course's; the same call on a line
    of the student's own is theirs."""
    course = "def load(path=None):\n    here = 1 if '__file__' in globals() else 0\n    return here\n"
    assert _around(course, course) == []
    assert _around(course + "x = globals()\n", course) == [
        "a05_encoder.py:4 reaches around the grader's rules (globals()); the stage is scored as if it used a "
        "forbidden API"]


def test_the_files_a_stage_runs_are_followed_through_imports(tmp_path):
    (tmp_path / "a06_decoder.py").write_text("from a05_encoder import Encoder\nimport helpers\nimport numpy\n")
    (tmp_path / "helpers.py").write_text("from .x import y\nimport deeper.sub\n")
    (tmp_path / "deeper.py").write_text("")
    (tmp_path / "a05_encoder.py").write_text("")
    (tmp_path / "unused.py").write_text("import gc\n")
    assert imported_files(str(tmp_path), ["a06_decoder", "a05_encoder"]) == [
        "a06_decoder.py", "a05_encoder.py", "helpers.py", "deeper.py"]
