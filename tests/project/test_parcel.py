"""A submission packed by the batch and unpacked on a grader that cannot see the class folder
(grader.classroom.parcel): the worker's intake must read what this machine's reads, line for line."""
from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

from grader.classroom import parcel
from grader.engine import submission
from grader.engine.submission import Format, UnreadableSubmission


def _intake(path: Path, tmp: Path) -> tuple:
    got = submission.intake(str(path), str(tmp), "s")
    files = {p.name: p.read_bytes() for p in Path(got.folder).iterdir()}
    return got.sha256, [str(line) for line in got.lines()], got.format, files


def _round_trip(path: Path, fmt: Format, tmp: Path) -> tuple:
    packed = parcel.pack(str(path), fmt)
    there = parcel.unpack(packed, str(tmp / "worker"))
    assert os.path.basename(there) == path.name
    return packed, _intake(Path(there), tmp / "intake-there"), _intake(path, tmp / "intake-here")


def test_a_folder_travels_as_its_intake_reads_it(tmp_path):
    """The stage modules in a nested folder, a notebook, and what the intake only names: a module that is a
    link, a folder named like a module, a module over the size limit; nothing else of the folder travels."""
    sub = tmp_path / "alice"
    work = sub / "my work"
    work.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "a01_similarity.py", work)
    (work / "helpers.py").write_text("X = 1\n")
    cell = {"cell_type": "code", "metadata": {"tags": ["solution"]}, "execution_count": None, "outputs": [],
            "source": (ROOT / "solutions" / "a02_softmax.py").read_text()}
    (work / "a02_softmax.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                        "cells": [cell]}))
    os.symlink("/etc/passwd", work / "a03_attention.py")
    (work / "a04_positional.py").mkdir()
    with open(work / "a05_encoder.py", "wb") as f:
        f.truncate(submission.MAX_FILE_BYTES + 1)
    (work / "data.csv").write_bytes(b"x" * 100_000)
    (work / ".hidden.py").write_text("hidden = True\n")  # pathlib's glob, the intake's, finds it
    (sub / "notes.txt").write_text("not read\n")

    packed, there, here = _round_trip(sub, Format.FOLDER, tmp_path)
    assert there == here
    assert len(here[1]) == 3, here[1]  # the link, the folder and the large file are each named
    assert sorted(e.path for e in packed.entries) == sorted(
        f"my work/{n}" for n in (".hidden.py", "a01_similarity.py", "helpers.py", "a02_softmax.ipynb",
                                 "a03_attention.py", "a04_positional.py", "a05_encoder.py"))
    assert packed.size < 50_000, "only what the intake reads travels (no data file, no large module's bytes)"


@pytest.mark.parametrize("kind", ["zip", "notebook"])
def test_a_zip_or_a_notebook_travels_whole(tmp_path, kind):
    if kind == "zip":
        path = tmp_path / "bob.zip"
        with zipfile.ZipFile(path, "w") as z:
            z.write(ROOT / "solutions" / "a01_similarity.py", "bob/a01_similarity.py")
        fmt = Format.ZIP
    else:
        path = tmp_path / "a01_similarity.ipynb"
        cell = {"cell_type": "code", "metadata": {"tags": ["solution"]}, "execution_count": None, "outputs": [],
                "source": (ROOT / "solutions" / "a01_similarity.py").read_text()}
        path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}))
        fmt = Format.NOTEBOOKS
    packed, there, here = _round_trip(path, fmt, tmp_path)
    assert there == here and packed.entries[0].data == path.read_bytes()


def test_a_submission_over_the_limit_is_unreadable_not_sent(tmp_path, monkeypatch):
    monkeypatch.setattr(parcel, "MAX_BYTES", 1000)
    sub = tmp_path / "carol"
    sub.mkdir()
    for i in range(3):
        (sub / f"a0{i + 1}_x.py").write_text("# padding\n" * 50)
    with pytest.raises(UnreadableSubmission, match="more than"):
        parcel.pack(str(sub), Format.FOLDER)
    big = tmp_path / "dave.zip"
    big.write_bytes(b"PK" + b"\0" * 2000)
    with pytest.raises(UnreadableSubmission, match="more than"):
        parcel.pack(str(big), Format.ZIP)


def test_an_entry_cannot_leave_the_worker_s_folder(tmp_path):
    bad = parcel.Parcel("eve", Format.FOLDER, (parcel.Entry("../../escaped.py", parcel.Kind.FILE, b"x = 1\n"),))
    with pytest.raises(ValueError, match="leaves its folder"):
        parcel.unpack(bad, str(tmp_path / "worker"))
    assert not (tmp_path / "escaped.py").exists()
