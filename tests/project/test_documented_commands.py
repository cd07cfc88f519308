"""Every command a document tells someone to type runs as written, on a fresh copy of what its reader has.

The documents: README.md and docs/*.md (the course repository: instructors, maintainers), the student bundle's
README.md and README.ko.md with every handout's "how to check" section (a bundle made by `grader release`), and
the template repository's READMEs (`grader classroom`). Each shell block runs from its copy's top folder after the
blocks before it (tests/project/doc_commands.py says how, and how a block is marked skipped, with the reason
shown, or slow). The bundle builds its own venv with `make check`, as a student's first command does (about a
minute and a half with pip's cache warm, then a check of every stage; conftest's ``fresh_copy`` builds the bundle
once a session, and test_release.py's checks run in the same copy and venv); the template builds another (slow).
The course repository's copies run in `make setup`'s venv, which `make test` itself needs.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT
from doc_commands import HANDOUT_SECTIONS, Block, blocks, run

from grader.engine import stages

BLOCK_TIMEOUT_S = 1500            # a venv built from nothing, then `make check` of every stage
README_MAX_LINES = 150
STUDENT_DOCS = {"docs/students.md": "README.md", "docs/students.ko.md": "README.ko.md"}  # run in the bundle
COURSE_DOCS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")
                                    if p.relative_to(ROOT).as_posix() not in STUDENT_DOCS)]
HANDOUTS = [f"assignments/{s.id}/{name}" for s in stages.all_stages() for name in ("README.md", "README.ko.md")]


def _params(kind: str, root: Path, docs: list, sections=None, slow: bool = False) -> list:
    found = []
    for doc in docs:
        for b in blocks(root, doc, sections):
            marks = [pytest.mark.xdist_group(f"docs-{kind}")]
            if b.slow or slow:
                marks.append(pytest.mark.slow)
            found.append(pytest.param(kind, b, id=f"{kind}:{b.id}", marks=marks))
    return found


ALL = [*_params("course", ROOT, COURSE_DOCS)]


def _reader_params() -> list:
    """The bundle's and the template's documents, as `release` and `classroom` write them (parsed from the
    documents they are made of, in a throwaway build)."""
    import tempfile

    from grader.authoring import github_template, release
    params = []
    with tempfile.TemporaryDirectory() as tmp:
        template = github_template.build(str(Path(tmp) / "template"))
        template_readme = [b for name in STUDENT_DOCS.values() for b in blocks(template, name)]
        bundle = release.build(str(Path(tmp) / "bundle"))
        params += _params("bundle", bundle, list(STUDENT_DOCS.values()))
        params += _params("bundle", bundle, HANDOUTS, HANDOUT_SECTIONS)
        params += [pytest.param("template", b, id=f"template:{b.id}",
                                marks=[pytest.mark.xdist_group("docs-template"), pytest.mark.slow])
                   for b in template_readme]
    return params


ALL += _reader_params()


RAN: dict = {}  # (copy, the block's commands without comments) -> its result


@pytest.mark.parametrize("kind,block", ALL)
def test_documented_command_runs_as_written(kind, block: Block, fresh_copy):
    """A block whose commands (comments aside) already ran in the same copy is not run again: that result stands
    for both (the Korean handouts give the English ones' commands)."""
    if block.skip:
        pytest.skip(f"{block.id}: {block.skip}")
    root = fresh_copy(kind, block.doc)
    key = (root, tuple(line.split("#")[0].strip() for line in block.text.splitlines()))
    done = RAN.get(key) or run(block, root, BLOCK_TIMEOUT_S)
    RAN[key] = done
    assert done.returncode == 0, (f"{kind} {block.id} exited {done.returncode}:\n{block.text}\n--- stdout\n"
                                  f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


def test_the_readme_is_short_and_points_to_each_readers_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    for page in (*STUDENT_DOCS, "docs/instructors.md", "docs/instructors.ko.md", "docs/maintainers.md"):
        assert page in text and (ROOT / page).is_file(), page


def test_the_student_bundle_runs_make_check_in_make_test():
    """At least the bundle's `make check` (a venv of its own) runs in `make test`, not only in the slow tests."""
    bundle = [p for p in ALL if p.values[0] == "bundle"]
    first = next(p for p in bundle if "make check" in p.values[1].text)
    assert not any(m.name == "slow" for m in first.marks) and not first.values[1].skip


def test_no_document_runs_the_grader_with_a_bare_python():
    """`python -m grader` fails outside the course's venv (a Python without numpy): every command says which
    Python, or goes through make."""
    bare = re.compile(r"(^|[;&|]\s*)(python3?|pytest)\s")
    for p in ALL:
        block = p.values[1]
        for line in block.text.splitlines():
            assert not bare.search(line.split("#")[0]), f"{block.id}: {line}"


def _options(command: str) -> set:
    from grader import cli
    sub = cli.parser()._subparsers._group_actions[0].choices[command]
    return {o for a in sub._actions for o in a.option_strings}


def _targets(makefile: Path) -> set:
    return set(re.findall(r"^([a-z][\w-]*):", makefile.read_text(encoding="utf-8"), flags=re.MULTILINE))


def test_no_page_contradicts_the_help():
    """Every `grader COMMAND --option` a page names is an option of that command (`--help`), and every
    `make TARGET` a target of the Makefile its reader has (the course's, or the bundle's docs/student.mk)."""
    from grader import cli
    commands = set(cli.parser()._subparsers._group_actions[0].choices)
    pages = [*COURSE_DOCS, *STUDENT_DOCS, *HANDOUTS, *(f"grader/authoring/templates/github/{name}"
                                                      for name in STUDENT_DOCS.values())]
    for page in pages:
        text = (ROOT / page).read_text(encoding="utf-8")
        student = page in STUDENT_DOCS or page.startswith(("assignments/", "grader/authoring/templates/"))
        targets = _targets(ROOT / ("docs/student.mk" if student else "Makefile"))
        for line in text.splitlines():
            for m in re.finditer(r"-m grader (\w+)((?: +[^\s`|#]+)*)", line):
                if m.group(1) not in commands:
                    continue
                for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", m.group(2)):
                    assert option in _options(m.group(1)), f"{page}: `grader {m.group(1)} {option}`: {line}"
            for m in re.finditer(r"`make ([a-z][\w-]*)|^make ([a-z][\w-]*)", line):
                target = m.group(1) or m.group(2)
                assert target in targets, f"{page}: `make {target}` is not a target there: {line}"
