"""What nothing handed to students may hold: the leak checks of the student bundle
(test_release.py) and of the template repository on GitHub (test_github_template.py)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

from grader.authoring import starter
from grader.engine import paths, seeds, stages


def texts(root: Path):
    """(path, text) of every file under ``root`` that reads as UTF-8."""
    for p in root.rglob("*"):
        if p.is_file():
            try:
                yield p, p.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def assert_no_solution_line(root: Path) -> None:
    """No line written only inside solution regions (of any stage) appears in what students
    read (starter, handouts, notebooks, public tests, README, workflow), and no run of three
    such lines appears anywhere (the grader's own code shares generic lines like
    `torch.manual_seed(seed)`). Lines that the starters ship anyway (course-provided code)
    are public by definition."""
    sources = [p.read_text(encoding="utf-8") for p in paths.SOLUTIONS.glob("a[0-9][0-9]_*.py")]
    public = {l.strip() for source in sources for l in starter.strip_solutions(source).splitlines()}
    secret_lines, secret_runs = set(), set()
    for source in sources:
        lines = source.splitlines()
        for start, end, _, _ in starter.regions(source):
            body = [l.strip() for l in lines[start + 1:end]
                    if l.strip() and not l.strip().startswith("#") and l.strip() not in public]
            secret_lines |= {l for l in body if len(l) >= 12}
            secret_runs |= {tuple(body[i:i + 3]) for i in range(len(body) - 2)}
    for p, text in texts(root):
        lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
        where = p.relative_to(root)
        if where.parts[0] != "grader":
            found = set(lines) & secret_lines
            assert not found, f"{where} contains solution code: {sorted(found)[:2]}"
        runs = {tuple(lines[i:i + 3]) for i in range(len(lines) - 2)} & secret_runs
        assert not runs, f"{where} contains a solution body: {sorted(runs)[:1]}"


def assert_no_hidden_test_stand_in_or_fixture(root: Path) -> None:
    """No file of the hidden tests, their fixtures, the solutions or the stand-ins (by path or by
    content), no mutant or alternative, not the course secret nor its text, and no hidden test's
    name in a stage.toml."""
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    assert not [f for f in files if "hidden" in f or "solutions" in f or "standins" in f or "mutants" in f
                or "alternatives" in f or f.startswith("tests/project")]
    secret_hashes = {hashlib.sha256(p.read_bytes()).hexdigest()
                     for folder in (paths.HIDDEN_TESTS, paths.SOLUTIONS, paths.SANDBOX / "standins")
                     for p in folder.rglob("*") if p.is_file()}
    leaked = [f for f in files if hashlib.sha256((root / f).read_bytes()).hexdigest() in secret_hashes]
    assert not leaked, leaked
    # the course secret the hidden inputs are drawn from: not the file, not its text anywhere
    secret = seeds.course_secret()
    assert not [f for f in files if f.endswith(seeds.SECRET_FILE.name)]
    assert not [p for p, text in texts(root) if secret in text]
    for stage in stages.all_stages():
        only_hidden = set(stage.hidden) - set(stage.public)
        toml = (root / "assignments" / stage.id / "stage.toml").read_text()
        declared = set(re.findall(r"^(test_\w+)\s*=", toml, flags=re.M))
        assert not declared & only_hidden, "hidden test names in the student stage.toml"


def assert_hidden_split_cannot_be_regenerated(root: Path, tmp: Path) -> None:
    """Stage 8's make_splits.py as shipped under ``root``, run as a student would (the command that once
    rebuilt the hidden file byte for byte, issue 25), rebuilds train and dev but refuses the hidden split;
    with the seeds a student could guess (none, the script's public SEED, 0, 1) it draws other tweets."""
    script = root / "assignments" / "a08_sentiment" / "data" / "make_splits.py"
    hidden = paths.HIDDEN_DATA / "a08_sentiment_test.jsonl"
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp), "--hidden-out", str(tmp / "test.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--hidden-seed" in done.stderr, (done.returncode, done.stderr[-500:])
    assert not (tmp / "test.jsonl").exists()
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("train.jsonl", "dev.jsonl"):
        assert (tmp / name).read_bytes() == (stages.get("a08_sentiment").folder / "data" / name).read_bytes()
    assert not list(tmp.glob("*test*"))
    spec = importlib.util.spec_from_file_location("_shipped_make_splits", script)
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    _, _, candidates = shipped.split(shipped.load(shipped.default_csv()))
    hidden_ids = [json.loads(line)["id"] for line in hidden.read_text(encoding="utf-8").splitlines()]
    for guess in (shipped.SEED, 0, 1):
        drawn = [r["id"] for r in shipped.hidden_split(candidates, guess)]
        assert drawn != hidden_ids, f"the hidden split is drawn with the guessable seed {guess}"
