"""Generate starter/ from solutions/: every solution region becomes a NotImplementedError.

    python -m grader.authoring.starter           # write starter/
    python -m grader.authoring.starter --check   # exit 1 if starter/ is out of date

A region is the lines between ``# BEGIN SOLUTION[: hint]`` and ``# END SOLUTION``
(inclusive); it is replaced by ``raise NotImplementedError("<hint>")`` at the
marker's indentation. Everything else (imports, signatures, docstrings,
course-provided code) is kept as it is.
"""
from __future__ import annotations

import re
import sys

from grader.engine import paths
from grader.engine.stages import STARTER_HEADER

BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION(?::\s*(?P<hint>.*))?$")
END = re.compile(r"^\s*# END SOLUTION\s*$")

class RegionError(ValueError):
    pass


def regions(source: str, name: str = "<source>"):
    """Yield (start, end, indent, hint) of each solution region (0-based, inclusive line numbers)."""
    lines = source.splitlines()
    start = None
    for i, line in enumerate(lines):
        if (m := BEGIN.match(line)):
            if start is not None:
                raise RegionError(f"{name}:{i + 1}: BEGIN SOLUTION inside another region")
            start, indent, hint = i, m.group("indent"), (m.group("hint") or "").strip()
        elif END.match(line):
            if start is None:
                raise RegionError(f"{name}:{i + 1}: END SOLUTION without BEGIN")
            yield start, i, indent, hint
            start = None
    if start is not None:
        raise RegionError(f"{name}:{start + 1}: BEGIN SOLUTION is never closed")


def strip_solutions(source: str, name: str = "<source>") -> str:
    lines = source.splitlines()
    out, pos = [], 0
    for start, end, indent, hint in regions(source, name):
        out.extend(lines[pos:start])
        message = hint or "write this part"
        out.append(f"{indent}raise NotImplementedError({message!r})")
        pos = end + 1
    out.extend(lines[pos:])
    body = "\n".join(out) + "\n"
    return STARTER_HEADER + body


def expected_files() -> dict:
    """starter file name -> content, from the current solutions."""
    return {p.name: strip_solutions(p.read_text(encoding="utf-8"), p.name)
            for p in sorted(paths.SOLUTIONS.glob("a[0-9][0-9]_*.py"))}


def write() -> list:
    paths.STARTER.mkdir(exist_ok=True)
    wanted = expected_files()
    for name, text in wanted.items():
        (paths.STARTER / name).write_text(text, encoding="utf-8")
    for stale in paths.STARTER.glob("a[0-9][0-9]_*.py"):
        if stale.name not in wanted:
            stale.unlink()
    return sorted(wanted)


def out_of_date() -> list:
    """Names of starter files that differ from what the solutions generate."""
    wanted = expected_files()
    have = {p.name for p in paths.STARTER.glob("a[0-9][0-9]_*.py")}
    stale = sorted(have - set(wanted))
    for name, text in wanted.items():
        path = paths.STARTER / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        stale = out_of_date()
        if stale:
            print("starter/ is out of date with solutions/ (run `make starter`): " + ", ".join(stale))
            return 1
        print("starter/ is up to date")
        return 0
    print("wrote starter/: " + ", ".join(write()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
