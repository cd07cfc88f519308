"""grader.engine.static_check: the forbidden APIs a submission's source names, found without running it."""
from __future__ import annotations

from grader.engine.static_check import scan

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
