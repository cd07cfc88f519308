"""The commands the documents tell people to type, found and run as they are written (test_documented_commands.py).

A command is a fenced block whose language is ``bash`` (or ``sh``): it is run as one bash script
(``bash -eo pipefail``: the first command that fails fails the block) in a fresh copy of what its reader has
(the course repository, the student bundle, the template repository), from its top folder (where its README
is and every document says to run them), after the blocks before it in the same document. Other fenced blocks
(``toml``, ``python``, ``text`` for a synopsis with placeholders) are examples, not commands. Of a handout only
its "how to check" section counts.

An HTML comment on the line before a block says what a test cannot do with it, and why (shown as the skip
reason), or that it is slow (a venv of its own, minutes: ``make test-slow``)::

    <!-- doc-test: skip needs GitHub: gh teacher download clones the students' repositories -->
    <!-- doc-test: slow -->
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
MARKER = re.compile(r"<!--\s*doc-test:\s*(skip|slow)\b\s*(.*?)\s*-->")
COMMAND_LANGUAGES = ("bash", "sh")
HANDOUT_SECTIONS = ("## How to check", "## 확인 방법")  # a handout's "how to check" section, in both languages


@dataclass(frozen=True)
class Block:
    """One documented command block: where it is, its text, and what its marker says."""
    doc: str              # the document's path in its copy, e.g. "README.md", "assignments/a02_softmax/README.md"
    line: int             # the line of its opening fence (1-based)
    text: str
    skip: str = ""        # why a test cannot run it ("" when it runs)
    slow: bool = False

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(root: Path, doc: str, sections=None) -> list[Block]:
    """The command blocks of ``root/doc`` in order; ``sections``: only those under a heading starting with one of
    these (up to the next heading of the same level)."""
    lines = (root / doc).read_text(encoding="utf-8").splitlines()
    found, inside, fence, lang, start, body, marker = [], sections is None, None, "", 0, [], None
    for n, line in enumerate(lines, 1):
        if fence is not None:
            if line.strip().startswith(fence):
                if inside and lang in COMMAND_LANGUAGES:
                    kind, why = marker or ("", "")
                    if kind == "skip" and not why:
                        raise ValueError(f"{doc}:{start}: a skipped block must say why")
                    found.append(Block(doc, start, "\n".join(body) + "\n", why if kind == "skip" else "",
                                       kind == "slow"))
                fence, marker = None, None
            else:
                body.append(line)
            continue
        if sections is not None and line.startswith("## "):
            inside = line.startswith(tuple(sections))
        m = FENCE.match(line)
        if m:
            fence, lang, start, body = m.group(2), m.group(3).lower(), n, []
            continue
        mark = MARKER.search(line)
        if mark:
            marker = (mark.group(1), mark.group(2))
        elif line.strip():
            marker = None
    return found


def clean_env(**extra) -> dict:
    """The environment a person's shell has: no venv of ours active, no PYTHONPATH into this repository."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL")
           and not k.startswith(("PYTEST_", "GRADER_"))}
    return {**env, "LANG": "C.UTF-8", **extra}


def run(block: Block, root: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run ``block`` in its copy ``root`` (from its top folder), as a person's shell would."""
    script = root / ".doc-test.sh"
    script.write_text(block.text, encoding="utf-8")
    try:
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=root, env=clean_env(), capture_output=True, text=True,
                              timeout=timeout)
    finally:
        script.unlink()


def repository_copy(source: Path, dest: Path, venv: Path) -> Path:
    """A fresh copy of the course repository: its files as git sees them (tracked, and new ones not ignored),
    times kept, and ``.venv`` standing for ``venv`` (``make setup``'s, which `make test` runs in): its own
    pyvenv.cfg and ``bin/`` of links, the libraries shared, and a stamp newer than the requirements, so that
    `make` in the copy never builds (or installs into) a venv."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=source, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = source / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    shim = dest / ".venv"
    (shim / "bin").mkdir(parents=True)
    shutil.copy(venv / "pyvenv.cfg", shim / "pyvenv.cfg")
    for entry in ("lib", "lib64", "include", "share"):
        if (venv / entry).exists():
            (shim / entry).symlink_to((venv / entry).resolve())
    for exe in (venv / "bin").iterdir():
        (shim / "bin" / exe.name).symlink_to(exe.resolve() if exe.name.startswith("python") else exe)
    (shim / ".installed").touch()  # after the copy: newer than every file it depends on (copied with their times)
    return dest
