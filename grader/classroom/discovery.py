"""Finding a class's submissions in a folder, and fingerprinting each the way its report will.

Every sub-folder (a folder of notebooks counts as a folder), ``.zip`` file and loose notebook
in the folder is one student's submission, named after it (``alice/``, ``alice.zip`` ->
``alice``). Two of one name (``zoe/`` and ``zoe.zip``) keep the file's full name for the second.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.engine import submission

SKIP_NAMES = {"__MACOSX", "__pycache__", ".ipynb_checkpoints"}
Format = submission.Format
_ORDER = {Format.FOLDER: 0, Format.ZIP: 1, Format.NOTEBOOKS: 2}   # of two entries with one name, which keeps it


@dataclass
class Job:
    """One submission of a batch."""
    id: str            # the student's id (folder / zip / notebook name)
    slug: str          # file-name-safe id for OUT/reports/<slug>.json and OUT/html/<slug>.html
    path: str          # absolute path of what was handed in
    format: Format     # a folder, a zip, or one notebook
    sha256: str = ""   # of the normalised stage modules (same as the report's), or of the raw bytes
    unreadable: str = ""  # why intake refused it (empty when readable)

    def __post_init__(self):
        self.format = Format(self.format)  # from JSON (a similarity worker's request) it comes as its value


def _slug(sid: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", sid).lstrip(".") or "_"


def _entries(folder: Path, excluded: set) -> tuple[list, list]:
    """(stem, format, path) of each submission-like entry, and the names of the others."""
    found, ignored = [], []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        name = entry.name
        if name.startswith(".") or name in SKIP_NAMES or os.path.realpath(entry) in excluded:
            continue
        try:
            fmt = Format.of(entry)
        except submission.UnreadableSubmission:
            ignored.append(name)
            continue
        found.append((name if fmt is Format.FOLDER else entry.stem, fmt, entry))
    found.sort(key=lambda t: (t[0], _ORDER[t[1]]))
    return found, ignored


def discover(folder: Path, exclude=()) -> tuple[list, list]:
    """The submissions in ``folder`` as Jobs (sorted, unique ids and slugs) and the names ignored."""
    found, ignored = _entries(folder, {os.path.realpath(p) for p in exclude})
    jobs, ids, slugs = [], set(), set()
    for stem, fmt, entry in found:
        sid = stem if stem not in ids else entry.name
        slug = _slug(sid)
        if slug in slugs:
            slug = f"{slug}-{hashlib.sha256(sid.encode()).hexdigest()[:8]}"
        ids.add(sid)
        slugs.add(slug)
        jobs.append(Job(id=sid, slug=slug, path=str(entry.resolve()), format=fmt))
    return jobs, ignored


def _raw_hash(path: Path) -> str:
    digest = hashlib.sha256(b"raw\0")
    if path.is_file():
        digest.update(path.read_bytes())
    elif path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file() and not p.is_symlink():
                digest.update(str(p.relative_to(path)).encode() + b"\0" + p.read_bytes()[:1 << 24] + b"\0")
    return digest.hexdigest()


def fingerprint(job: Job) -> None:
    """Fill ``job.sha256`` the way the report will (normalised stage modules) or, when the
    submission cannot be read, with a hash of its raw bytes and ``job.unreadable``."""
    tmp = tempfile.mkdtemp(prefix="grader-intake-")
    try:
        target = job.path
        if job.format is Format.NOTEBOOKS:
            target = submission.notebook_alone(job.path, tmp)
        intake = submission.intake(target, os.path.join(tmp, "intake"), job.id)
        job.sha256 = intake.sha256
    except submission.UnreadableSubmission as exc:
        job.sha256, job.unreadable = _raw_hash(Path(job.path)), str(exc)
    except OSError as exc:
        job.sha256, job.unreadable = _raw_hash(Path(job.path)), f"cannot be read: {exc}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
