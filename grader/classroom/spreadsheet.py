"""The batch's CSV files: cells a spreadsheet shows as written, written atomically."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.engine.atomic import write_bytes


def write(path: Path, rows) -> None:
    """``rows`` (lists of cells, the header first) as ``path``, in one atomic write."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    write_bytes(str(path), buf.getvalue().encode())


def safe_cell(text: str) -> str:
    """Text a spreadsheet will not run as a formula (a folder or zip name is chosen by the student)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def fmt(x) -> str:
    """A score as a spreadsheet cell: up to 4 decimals, no trailing zeros."""
    return f"{float(x):.4f}".rstrip("0").rstrip(".") if x not in ("", None) else ""
