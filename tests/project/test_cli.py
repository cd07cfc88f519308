"""The command line's exit codes (grader.cli): 2 is the user's mistake, 1 the grader's."""
from __future__ import annotations

import os
import subprocess
import sys
import venv

from conftest import ROOT

from grader import cli
from grader.authoring import release
from grader.engine.feedback_groups import diagnosis_key


def test_an_unknown_stage_is_a_usage_error(capsys):
    assert cli.main(["check", "a99", str(ROOT / "starter")]) == 2
    assert cli.main(["grade", "--stages", "a01_similarity,nope"]) == 2
    err = capsys.readouterr().err
    assert "no stage 'a99'" in err and "no stage 'nope'" in err and "a01_similarity" in err
    assert "bug in the grader" not in err


def test_any_other_key_error_is_the_graders_bug(tmp_path, monkeypatch, capsys):
    """A missing key in the grader's own data once passed for a usage error (exit 2)."""
    def broken(out_dir):
        return {}["score"]

    monkeypatch.setattr(release, "build", broken)
    assert cli.main(["release", str(tmp_path / "bundle")]) == 1
    err = capsys.readouterr().err
    assert "KeyError: 'score'" in err and "this is a bug in the grader" in err


def test_a_python_without_the_graders_packages_says_so_in_one_line(tmp_path):
    """The handouts' command run with a Python that lacks numpy (a fresh venv): a setup problem, not a bug: one
    line naming the package and the command to use, exit 1."""
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    done = subprocess.run([str(bare / "bin" / "python"), "-m", "grader", "check", "a02_softmax", "--lang", "en"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "has no numpy" in line and "`make check`" in line, line
    assert line.endswith(".venv/bin/python -m grader check a02_softmax --lang en"), line


def test_check_says_a_repeated_feedback_once_with_the_tests_it_covers():
    """The starter's stubs fail every public test of a stage with the same paragraph on other inputs: it is
    printed once per group, after the tests it covers."""
    done = subprocess.run([sys.executable, "-m", "grader", "check", "a02_softmax", str(ROOT / "starter"), "--lang",
                           "en"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    failed = [x for x in lines if "a02_softmax::test_" in x]
    said = [x for x in lines if "raised NotImplementedError" in x]
    assert len(failed) > len(said) >= 1, done.stdout
    assert "(the same feedback for these" in done.stdout
    assert len({diagnosis_key(x) for x in said}) == len(said), "each feedback once"
    assert "isolation" not in done.stdout + done.stderr, "a student is told nothing of the layers when strict"


def test_the_options_people_reach_for_have_help():
    """`--help` is the reference the documents must not contradict: every option says what it does."""
    for command in ("check", "grade", "batch", "collect", "similarity", "gradescope"):
        sub = cli.parser()._subparsers._group_actions[0].choices[command]
        undocumented = [a.option_strings or [a.dest] for a in sub._actions
                        if a.help is None and a.dest not in ("help",) and a.option_strings]
        assert not undocumented, (command, undocumented)
