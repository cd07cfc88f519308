"""Turning what a student hands in (folder, .zip, notebooks) into a flat folder of stage modules.

Nothing here executes submitted code. Archives are read entry by entry and
refused whole when they try to escape (``../``, absolute paths, symlinks) or
blow up (too many entries, too many bytes).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..i18n import tr
from . import notebooks  # notebooks are converted into modules, cell tags decide what is code

STAGE_FILE = re.compile(r"^a\d\d_[a-z0-9_]+\.py$")
MAX_FILE_BYTES = 2 << 20
MAX_ZIP_BYTES = 64 << 20
MAX_ZIP_ENTRIES = 2000


class UnreadableSubmission(Exception):
    """The submission cannot be graded at all (exit code 2)."""


class Format(str, Enum):
    """What was handed in (the report's ``submission.format``)."""
    FOLDER = "folder"
    ZIP = "zip"
    NOTEBOOKS = "notebooks"   # one notebook, or a folder of them

    @classmethod
    def of(cls, path: Path) -> Format:
        """The format of the submission at ``path``."""
        if path.is_file() and path.suffix == ".zip":
            return cls.ZIP
        if path.is_file() and path.suffix == ".ipynb":
            return cls.NOTEBOOKS
        if path.is_dir():
            return cls.FOLDER
        raise UnreadableSubmission(tr("{path} is neither a folder, a .zip nor a notebook", path=str(path)))


@dataclass(frozen=True)
class Note:
    """Something the intake found about one file of the submission (a line of the report's ``errors``)."""
    file: str             # the file's name, e.g. a03_attention.ipynb
    text: str             # the whole line, starting with the file's name

    @property
    def stage(self) -> str | None:
        """The stage the file is named after (a03_attention), or None."""
        stem = self.file.rsplit(".", 1)[0]
        return stem if re.fullmatch(r"a\d\d_[a-z0-9_]+", stem) else None


@dataclass
class Intake:
    id: str
    path: str             # what was handed in
    folder: str           # flat folder of modules to grade
    format: Format
    sha256: str = ""
    errors: list[Note] = field(default_factory=list)

    def notes_about(self, stage_id: str) -> list[str]:
        """The lines about the files of one stage."""
        return [n.text for n in self.errors if n.stage == stage_id]

    def lines(self) -> list[str]:
        return [n.text for n in self.errors]


def stage_root(root: Path) -> Path:
    """The folder holding the stage modules: ``root`` itself or a single nested folder."""
    if any(STAGE_FILE.match(p.name) for p in root.iterdir() if p.is_file()):
        return root
    for sub in sorted(p for p in root.rglob("*") if p.is_dir() and not p.name.startswith(("__", "."))):
        if len(sub.relative_to(root).parts) <= 2 and any(STAGE_FILE.match(p.name) for p in sub.iterdir()):
            return sub
    return root


def _extract_zip(path: Path, dest: Path) -> None:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        # i18n: {archive} is the name of the submitted .zip file; {error} is Python's message, in English.
        raise UnreadableSubmission(tr("{archive} is not a readable zip file ({error})",
                                      archive=path.name, error=exc)) from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise UnreadableSubmission(tr("{archive} has {entries} entries (limit {limit})",
                                          archive=path.name, entries=len(infos),
                                          limit=MAX_ZIP_ENTRIES))
        total = 0
        for info in infos:
            name = info.filename
            parts = Path(name).parts
            if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
                raise UnreadableSubmission(tr("{archive} has an entry that escapes the folder: {name}",
                                              archive=path.name, name=f"{name!r}"))
            if stat.S_ISLNK(info.external_attr >> 16):
                raise UnreadableSubmission(tr("{archive} contains a symbolic link: {name}",
                                              archive=path.name, name=f"{name!r}"))
            total += info.file_size
            if total > MAX_ZIP_BYTES:
                raise UnreadableSubmission(tr("{archive} unpacks to more than {limit} MB",
                                              archive=path.name, limit=MAX_ZIP_BYTES >> 20))
        for info in infos:
            if info.is_dir() or not name_is_wanted(info.filename):
                continue
            target = dest / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as out:
                copied = 0
                while chunk := src.read(1 << 16):
                    copied += len(chunk)
                    if copied > MAX_FILE_BYTES:  # the header lied about the size
                        # i18n: {entry} is the name of a file inside the .zip file {archive}.
                        raise UnreadableSubmission(tr("{entry} in {archive} is larger than it claims",
                                                      entry=info.filename, archive=path.name))
                    out.write(chunk)


def name_is_wanted(name: str) -> bool:
    return name.endswith((".py", ".ipynb")) and "__MACOSX" not in name


def _hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for p in sorted(folder.glob("*.py")):
        digest.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return digest.hexdigest()


def intake(path: str, dest: str, submission_id: str | None = None) -> Intake:
    """Normalise ``path`` into ``dest`` (a new, private folder) and describe it."""
    src = Path(path)
    dest_path = Path(dest)
    dest_path.mkdir(parents=True, exist_ok=True)
    sid = submission_id or src.name.removesuffix(".zip")
    if not src.exists():
        raise UnreadableSubmission(tr("{path} does not exist", path=path))
    fmt = Format.of(src)
    if fmt is Format.ZIP:
        unpacked = dest_path / "_unpacked"
        unpacked.mkdir()
        _extract_zip(src, unpacked)
        root = stage_root(unpacked)
    else:
        root = src.parent if src.is_file() else stage_root(src)

    modules = dest_path / "modules"
    modules.mkdir()
    found = [src] if fmt is Format.NOTEBOOKS else sorted(p for p in root.glob("*.ipynb") if p.is_file())
    errors = [Note(file, text) for file, text in notebooks.convert(found, modules)]
    for p in sorted(root.glob("*.py")):
        if p.is_symlink() or not p.is_file():
            errors.append(Note(p.name, tr("{file} is a symbolic link or not a file; ignored", file=p.name)))
            continue
        if p.stat().st_size > MAX_FILE_BYTES:
            errors.append(Note(p.name, tr("{file} is larger than {limit} MB; ignored",
                                          file=p.name, limit=MAX_FILE_BYTES >> 20)))
            continue
        data = p.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(Note(p.name, tr("{file} is not UTF-8 text ({reason} at byte {byte}); save it "
                                          "as UTF-8", file=p.name, reason=exc.reason, byte=exc.start)))
        if (modules / p.name).exists():
            errors.append(Note(p.name, tr("{file} is given both as a .py file and in a notebook; the .py file is "
                                          "graded", file=p.name)))
        (modules / p.name).write_bytes(data)
    if not any(STAGE_FILE.match(p.name) for p in modules.iterdir()):
        raise UnreadableSubmission(tr("{path} holds no stage module (a01_similarity.py … a09_retrieval.py)",
                                      path=path))
    return Intake(id=sid, path=str(path), folder=str(modules), format=fmt, sha256=_hash(modules), errors=errors)


def notebook_alone(path: str, tmp: str) -> str:
    """A loose notebook is graded from a private copy, so that the folder it sits in
    (the class's submissions folder) is not read as part of it."""
    folder = os.path.join(tmp, "notebook")
    os.makedirs(folder, exist_ok=True)
    dest = os.path.join(folder, os.path.basename(path))
    shutil.copyfile(path, dest)
    return dest
