"""grader.engine.atomic: a file is there whole or not at all, never half-written."""
from __future__ import annotations

import json
import os

import pytest

from grader.engine import atomic


def test_write_json_creates_folders_and_reads_back(tmp_path):
    path = tmp_path / "a" / "b" / "report.json"
    atomic.write_json(str(path), {"score": 1.5, "stages": []})
    assert json.loads(path.read_text()) == {"score": 1.5, "stages": []}
    assert path.read_text().endswith("\n")


def test_replacing_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "grades.csv"
    atomic.write_bytes(str(path), b"first")
    atomic.write_bytes(str(path), b"second")
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv"]


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    atomic.write_bytes(str(path), b"old")

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        atomic.write_bytes(str(path), b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_what_cannot_be_json_raises_before_anything_is_written(tmp_path):
    path = tmp_path / "report.json"
    with pytest.raises(TypeError):
        atomic.write_json(str(path), {"x": object()})
    assert not path.exists() and list(tmp_path.iterdir()) == []
