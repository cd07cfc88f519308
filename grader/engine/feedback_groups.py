"""Feedback that repeats, said once with the tests it covers.

One mistake often fails several tests of a stage (a stub still raising ``NotImplementedError``, a softmax
over the wrong axis), each with the same paragraph about other inputs. ``check``'s table and the GitHub
summary show such feedback once, after the tests it covers; the class page groups the feedback of a whole
class the same way (``classroom/html_report``). Two texts are the same feedback when they differ only in
their numbers (values, indices, shapes): ``diagnosis_key``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
_NUMBERS = re.compile(r"#(?:[\s,]+#)*,?")   # a list of blanked numbers: a shape (3,) or (2, 4), an array [1 2 3]


def diagnosis_key(feedback: str) -> str:
    """Feedback with its numbers blanked (a shape or a list of numbers counts as one): the same mistake on
    other data gives the same key."""
    text = _NUMBERS.sub("#", _NUMBER.sub("#", feedback or ""))
    return re.sub(r"\s+", " ", text).strip()[:400]


@dataclass
class FeedbackGroup:
    """Tests whose feedback is the same (``diagnosis_key``); ``feedback`` is the first one's, as written."""
    feedback: str
    tests: list = field(default_factory=list)


def group_failures(tests) -> list[FeedbackGroup]:
    """``tests`` (each with a ``feedback``) grouped by their feedback, in the order each group first appears;
    tests with no feedback each stay alone."""
    groups, by_key = [], {}
    for t in tests:
        key = diagnosis_key(t.feedback) if t.feedback else None
        group = by_key.get(key) if key is not None else None
        if group is None:
            group = FeedbackGroup(t.feedback)
            groups.append(group)
            if key is not None:
                by_key[key] = group
        group.tests.append(t)
    return groups
