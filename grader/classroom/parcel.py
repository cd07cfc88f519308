"""A submission carried to a grader that cannot see the class folder (a Dask worker on another machine).

The batch's client packs what the intake (``engine/submission.py``) would read of a submission: a zip or a
loose notebook whole; of a folder, the ``.py`` and ``.ipynb`` entries of the folder the intake grades (the
folder itself, or the single nested folder holding the stage modules), at the same place. What the intake
only names and ignores travels as what it is, without its bytes: a symbolic link as a link to nowhere, an
entry that is not a file as an empty folder, a ``.py`` file over the intake's size limit as an empty file of
that size (sparse). The worker unpacks the parcel into a folder of its own, under the submission's own name,
and grades it as the local executor grades the original: the same intake, the same lines, the same sha256.

A parcel holds at most ``MAX_BYTES`` (the most a zip may unpack to); a larger submission is unreadable.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from grader.engine import submission
from grader.engine.submission import Format, UnreadableSubmission

MAX_BYTES = submission.MAX_ZIP_BYTES


class Kind(str, Enum):
    """What one entry of a parcel is."""
    FILE = "file"          # its bytes
    LINK = "link"          # a symbolic link the intake ignores (its target is not sent)
    OTHER = "other"        # not a file (a folder named like a module): the intake ignores it
    TOO_LARGE = "large"    # a module over the intake's size limit: only its size is sent


@dataclass(frozen=True)
class Entry:
    path: str              # relative to the submission ("" for a zip or a loose notebook: the file itself)
    kind: Kind
    data: bytes = b""
    size: int = 0          # of a TOO_LARGE module


@dataclass(frozen=True)
class Parcel:
    """A submission as bytes: its name in the class folder (``alice``, ``alice.zip``), its format, its entries."""
    name: str
    format: Format
    entries: tuple = field(default_factory=tuple)

    @property
    def size(self) -> int:
        return sum(len(e.data) for e in self.entries)


def _entry(p: Path, rel: str) -> Entry | None:
    """What the intake reads or names of the folder entry ``p`` (None: it does not look at it)."""
    if p.suffix == ".ipynb":  # the intake reads a notebook through a link too
        return Entry(rel, Kind.FILE, p.read_bytes()) if p.is_file() else None
    if p.is_symlink():
        return Entry(rel, Kind.LINK)
    if not p.is_file():
        return Entry(rel, Kind.OTHER)
    if p.stat().st_size > submission.MAX_FILE_BYTES:
        return Entry(rel, Kind.TOO_LARGE, size=p.stat().st_size)
    return Entry(rel, Kind.FILE, p.read_bytes())


def _folder_entries(folder: Path) -> list:
    """The entries of a folder submission that its intake reads or names (``submission.intake``: the ``.py``
    and ``.ipynb`` entries of its stage root), until they hold more than ``MAX_BYTES``."""
    root = submission.stage_root(folder)
    entries, size = [], 0
    for p in sorted(root.iterdir()):
        if p.suffix not in (".py", ".ipynb"):
            continue
        entry = _entry(p, str(p.relative_to(folder)))
        if entry is not None:
            entries.append(entry)
            size += len(entry.data)
        if size > MAX_BYTES:
            break
    return entries


def pack(path: str, fmt: Format) -> Parcel:
    """The parcel of the submission at ``path``; ``UnreadableSubmission`` when it holds more than ``MAX_BYTES``."""
    src = Path(path)
    too_large = UnreadableSubmission(f"{src.name} holds more than {MAX_BYTES >> 20} MB, the most a submission may "
                                     "hold to be sent to a grading worker")
    try:
        if fmt is not Format.FOLDER and src.stat().st_size > MAX_BYTES:
            raise too_large
        entries = _folder_entries(src) if fmt is Format.FOLDER else [Entry("", Kind.FILE, src.read_bytes())]
    except OSError as exc:
        raise UnreadableSubmission(f"{path} cannot be read: {exc}") from None
    parcel = Parcel(src.name, fmt, tuple(entries))
    if parcel.size > MAX_BYTES:
        raise too_large
    return parcel


def _safe(folder: Path, rel: str) -> Path:
    """``folder / rel``, refusing a path that leaves ``folder`` (a parcel is the client's, but a path is a path)."""
    target = (folder / rel).resolve()
    if rel.startswith("/") or not target.is_relative_to(folder.resolve()):
        raise ValueError(f"a parcel entry leaves its folder: {rel!r}")
    return folder / rel


def unpack(parcel: Parcel, folder: str) -> str:
    """Write ``parcel`` into the new folder ``folder`` (private to this user) and return the submission's path
    there (``folder/<name>``)."""
    base = Path(folder)
    base.mkdir(mode=0o700)
    top = _safe(base, parcel.name)
    if parcel.format is not Format.FOLDER:
        top.write_bytes(parcel.entries[0].data)
        return str(top)
    top.mkdir()
    for e in parcel.entries:
        target = _safe(top, e.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if e.kind is Kind.FILE:
            target.write_bytes(e.data)
        elif e.kind is Kind.LINK:
            os.symlink(os.path.join(os.sep, "nonexistent", "link"), target)
        elif e.kind is Kind.OTHER:
            target.mkdir()
        else:
            with open(target, "wb") as f:
                f.truncate(e.size)
    return str(top)
