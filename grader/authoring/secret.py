"""A new course secret, for a new term: ``make secret`` (``python -m grader.authoring.secret``).

The hidden suites draw their random inputs from it (``grader/engine/seeds.py``), so
a new secret gives every submission new inputs: last term's feedback gives away
nothing of this term's cases. Commit the new ``tests/hidden/course_secret.txt``
with the hidden suites; regrades of last term's submissions need the old one
(or each report's ``seed``: ``grade --seed N``).
"""
from __future__ import annotations

import secrets
import sys

from grader.engine import seeds


def rotate(path=None) -> str:
    path = seeds.SECRET_FILE if path is None else path
    value = secrets.token_hex(32)
    path.write_text(value + "\n", encoding="utf-8")
    return value


def main(argv=None) -> int:
    rotate()
    print(f"new course secret written to {seeds.SECRET_FILE}; commit it with the hidden suites")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
