"""What nothing handed to students may hold: the leak checks of the student bundle
(test_release.py) and of the template repository on GitHub (test_github_template.py)."""
from __future__ import annotations

import hashlib
import re
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
