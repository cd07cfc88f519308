"""The student bundle holds no solution, no hidden test, no expected value, and `check` works in it."""
import shutil
import subprocess
import sys

import leaks
import pytest

from grader.authoring import release
from grader.engine import stages


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return release.build(str(tmp_path_factory.mktemp("release") / "student"))


def test_bundle_has_what_students_need(bundle):
    for stage in stages.all_stages():
        assert (bundle / "starter" / f"{stage.id}.py").exists()
        assert (bundle / "assignments" / stage.id / "README.md").exists()
        assert (bundle / "assignments" / stage.id / "README.ko.md").exists()
        assert (bundle / "tests" / "public" / f"test_{stage.id}.py").exists()
    assert (bundle / "grader" / "__main__.py").exists() and (bundle / "README.md").exists()


def test_no_solution_line_in_the_bundle(bundle):
    leaks.assert_no_solution_line(bundle)


def test_no_hidden_test_stand_in_or_fixture_in_the_bundle(bundle):
    leaks.assert_no_hidden_test_stand_in_or_fixture(bundle)


def test_the_bundle_cannot_regenerate_the_hidden_tweets(bundle, tmp_path):
    leaks.assert_hidden_split_cannot_be_regenerated(bundle, tmp_path)


@pytest.mark.xdist_group("docs-bundle")
def test_check_works_in_the_bundle_on_its_own_venv(fresh_copy, tmp_path):
    """In the bundle whose venv its README's `make check` built (or builds now: `make setup`, the same
    recipe), with the pins of constraints/: the starter scores 0, the reference full marks on a numpy stage and
    a torch stage whose public tests use probes (the bundle has no stand-ins), and `pytest tests/public` alone
    says to use `make check`."""
    from doc_commands import clean_env
    bundle = fresh_copy("bundle")
    setup = subprocess.run(["make", "setup"], cwd=bundle, env=clean_env(), capture_output=True, text=True,
                           timeout=1500)
    assert setup.returncode == 0, setup.stderr[-2000:]
    py = str(bundle / ".venv" / "bin" / "python")
    frozen = subprocess.run([py, "-m", "pip", "freeze"], capture_output=True, text=True, env=clean_env()).stdout
    pins = (bundle / "constraints" / f"py{sys.version_info[0]}.{sys.version_info[1]}.txt").read_text()
    for package in ("numpy", "pytest", "safetensors"):
        (installed,) = [x for x in frozen.splitlines() if x.lower().startswith(package + "==")]
        assert installed in pins, f"{installed} is not the pinned version"

    def check(*args):
        done = subprocess.run([py, "-m", "grader", "check", *args], cwd=bundle, env=clean_env(),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    on_starter = check("a02_softmax")
    assert "NotImplementedError" in on_starter and "0.00 /" in on_starter
    work = tmp_path / "mywork"
    work.mkdir()
    for stage_id in ("a02_softmax", "a05_encoder"):
        shutil.copy(stages.get(stage_id).solution, work)
        out = check(stage_id[:3], str(work))
        points = stages.get(stage_id).points
        assert f"{points:.2f} / {points:.0f}" in out, out[-2000:]
    alone = subprocess.run([py, "-m", "pytest", "tests/public", "-q", "-p", "no:cacheprovider"], cwd=bundle,
                           env=clean_env(), capture_output=True, text=True, timeout=300)
    assert alone.returncode == 4 and "make check" in alone.stdout + alone.stderr, alone.stdout[-2000:]
    assert "fixture 'student' not found" not in alone.stdout
