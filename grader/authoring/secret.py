"""A new course secret, for a new term: ``make secret`` (``python -m grader.authoring.secret``).

The hidden suites draw their random inputs from it (``grader/engine/seeds.py``), so
a new secret gives every submission new inputs: last term's feedback gives away
nothing of this term's cases. The hidden data drawn with it is drawn again too:
stage 8's test split (``tests/hidden/data/a08_sentiment_test.jsonl``, 500 tweets
per class out of the public corpus's tweets that are in neither train nor dev,
by ``assignments/a08_sentiment/data/make_splits.py --hidden-seed``). Commit the
new ``tests/hidden/course_secret.txt`` and the data with the hidden suites;
regrades of last term's submissions need the old ones (or each report's
``seed``, ``grade --seed N``, for the random inputs).
"""
from __future__ import annotations

import importlib.util
import secrets
import sys

from grader.engine import seeds, stages

A08_SPLIT = "a08_sentiment test split"  # the name stage 8's hidden split seed is derived under (seeds.data_seed)


def rotate(path=None) -> str:
    path = seeds.SECRET_FILE if path is None else path
    value = secrets.token_hex(32)
    path.write_text(value + "\n", encoding="utf-8")
    return value


def make_splits():
    """Stage 8's data script (assignments/a08_sentiment/data/make_splits.py), imported from its file."""
    script = stages.get("a08_sentiment").folder / "data" / "make_splits.py"
    spec = importlib.util.spec_from_file_location("_a08_make_splits", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw_hidden_data(secret: str | None = None, out_dir=None) -> None:
    """Draw the hidden data that depends on the secret: stage 8's test split (and, in ``out_dir`` if
    given, else in place, its public train and dev files, which the secret does not change)."""
    args = ["--hidden-seed", str(seeds.data_seed(A08_SPLIT, secret))]
    if out_dir is not None:
        args += ["--out", str(out_dir), "--hidden-out", str(out_dir / "a08_sentiment_test.jsonl")]
    make_splits().main(args)


def main(argv=None) -> int:
    rotate()
    draw_hidden_data()
    print(f"new course secret written to {seeds.SECRET_FILE} and stage 8's hidden test split drawn with it; "
          "commit both with the hidden suites")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
