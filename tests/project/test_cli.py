"""The command line's exit codes (grader.cli): 2 is the user's mistake, 1 the grader's."""
from __future__ import annotations

from conftest import ROOT

from grader import cli
from grader.authoring import release


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
