"""The student bundle holds no solution, no hidden test, no expected value, and `check` works in it."""
import os
import shutil
import subprocess
import venv

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
