"""The seeds hidden tests draw their random inputs from.

A hidden case's inputs must not be the same for every student and every term:
one student's feedback (or last year's) would then give away the inputs and
expected outputs of a case, to be hard-coded. So every random input is drawn
from a seed that depends on a course secret, the submission's id and the stage:

    seed       = H("submission", secret, submission id)   # recorded in the report; `grade --seed` takes it
    stage seed = H("stage", seed, stage id)
    case seed  = H("case", stage seed, case)              # testing.rng(case), testing.randn(..., case=...)
    data seed  = H("data", secret, name)                  # a hidden data file drawn once per term (data_seed)

H is sha256, its first 6 bytes read as an integer (48 bits: exact in JSON and in
JavaScript, and out of reach of guessing without the secret). The same id always
gets the same seed (a regrade reproduces the report); ``grade --seed N``
reproduces a report whose seed was N without the secret or the id.

The secret is ``tests/hidden/course_secret.txt``, committed with the hidden
suites (secret like them: the worker cannot read tests/, the student bundle has
no tests/hidden); ``make secret`` writes a new one for a new term.
"""
from __future__ import annotations

import hashlib

from . import paths

SECRET_FILE = paths.HIDDEN_TESTS / "course_secret.txt"
BITS = 48


class NoSecret(RuntimeError):
    """The course secret is not there (a student bundle, or a clone without tests/hidden)."""


def _h(*parts) -> int:
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:BITS // 8], "big")


def course_secret(path=None) -> str:
    path = SECRET_FILE if path is None else path
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise NoSecret(f"{path} is missing: the hidden suites draw their inputs from it "
                       "(`make secret` writes one; or give the seed, `grade --seed N`)") from None
    if len(text) < 32:
        raise NoSecret(f"{path} holds fewer than 32 characters; `make secret` writes a proper one")
    return text


def submission_seed(submission_id: str, secret: str | None = None) -> int:
    """The seed of a submission: from the course secret and the submission's id."""
    return _h("submission", course_secret() if secret is None else secret, submission_id)


def stage_seed(seed: int, stage_id: str) -> int:
    return _h("stage", int(seed), stage_id)


def case_seed(stage_seed_: int, case) -> int:
    """The seed of one case of a stage (``case``: the test's own number, or any str/int)."""
    return _h("case", int(stage_seed_), case)


def data_seed(name: str, secret: str | None = None) -> int:
    """The seed a hidden data file is drawn with (``name``: which file, e.g. ``"a08_sentiment test split"``):
    the same for every submission of a term, unknown without the course secret, new with ``make secret``."""
    return _h("data", course_secret() if secret is None else secret, name)
