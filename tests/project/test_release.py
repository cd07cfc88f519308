"""The student bundle holds no solution, no hidden test, no expected value, and `check` works in it."""
import hashlib
import os
import re
import shutil
import subprocess
import venv

import pytest

from grader.authoring import release, starter
from grader.engine import paths, seeds, stages


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return release.build(str(tmp_path_factory.mktemp("release") / "student"))


def bundle_texts(bundle):
    for p in bundle.rglob("*"):
        if p.is_file():
            try:
                yield p, p.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def test_bundle_has_what_students_need(bundle):
    for stage in stages.all_stages():
        assert (bundle / "starter" / f"{stage.id}.py").exists()
        assert (bundle / "assignments" / stage.id / "README.md").exists()
        assert (bundle / "assignments" / stage.id / "README.ko.md").exists()
        assert (bundle / "tests" / "public" / f"test_{stage.id}.py").exists()
    assert (bundle / "grader" / "__main__.py").exists() and (bundle / "README.md").exists()


def test_no_solution_line_in_the_bundle(bundle):
    """No line written only inside solution regions (of any stage) appears in what students
    read (starter, handouts, notebooks, public tests), and no run of three such lines
    appears anywhere (the grader's own code shares generic lines like `torch.manual_seed(seed)`).
    Lines that the starters ship anyway (course-provided code) are public by definition."""
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
    for p, text in bundle_texts(bundle):
        lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
        where = p.relative_to(bundle)
        if where.parts[0] != "grader":
            found = set(lines) & secret_lines
            assert not found, f"{where} contains solution code: {sorted(found)[:2]}"
        runs = {tuple(lines[i:i + 3]) for i in range(len(lines) - 2)} & secret_runs
        assert not runs, f"{where} contains a solution body: {sorted(runs)[:1]}"


def test_no_hidden_test_stand_in_or_fixture_in_the_bundle(bundle):
    files = [p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()]
    assert not [f for f in files if "hidden" in f or "solutions" in f or "standins" in f or "mutants" in f
                or "alternatives" in f or f.startswith("tests/project")]
    secret_hashes = {hashlib.sha256(p.read_bytes()).hexdigest()
                     for folder in (paths.HIDDEN_TESTS, paths.SOLUTIONS, paths.SANDBOX / "standins")
                     for p in folder.rglob("*") if p.is_file()}
    leaked = [f for f in files if hashlib.sha256((bundle / f).read_bytes()).hexdigest() in secret_hashes]
    assert not leaked, leaked
    # the course secret the hidden inputs are drawn from: not the file, not its text anywhere
    secret = seeds.course_secret()
    assert not [f for f in files if f.endswith(seeds.SECRET_FILE.name)]
    assert not [p for p, text in bundle_texts(bundle) if secret in text]
    for stage in stages.all_stages():
        only_hidden = set(stage.hidden) - set(stage.public)
        toml = (bundle / "assignments" / stage.id / "stage.toml").read_text()
        declared = set(re.findall(r"^(test_\w+)\s*=", toml, flags=re.M))
        assert not declared & only_hidden, "hidden test names in the student stage.toml"


@pytest.mark.skipif(shutil.which("python3") is None, reason="needs python3")
def test_check_works_in_the_bundle_on_a_fresh_venv(bundle, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = str(env_dir / "bin" / "python")
    install = subprocess.run([py, "-m", "pip", "install", "-q", "-r", str(bundle / "requirements.txt")],
                             capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def check(*args):
        done = subprocess.run([py, "-m", "grader", "check", *args], cwd=bundle, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    on_starter = check("a02_softmax")
    assert "NotImplementedError" in on_starter and "0.00 /" in on_starter
    work = tmp_path / "mywork"
    work.mkdir()
    # a numpy stage, and a torch stage whose public tests use probes (the bundle has no stand-ins)
    for stage_id in ("a02_softmax", "a05_encoder"):
        shutil.copy(stages.get(stage_id).solution, work)
        out = check(stage_id[:3], str(work))
        points = stages.get(stage_id).points
        assert f"{points:.2f} / {points:.0f}" in out, out[-2000:]
