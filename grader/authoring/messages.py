"""The message catalogue: extract every marked text, update the Korean catalogue, compile it (``make messages``).

Marked texts are ``tr("...")`` in the grader and the suites, the first line of each test's docstring (its
name on every report) and ``_("...")`` in the HTML templates. Babel extracts them into two catalogues
(``grader.i18n.catalogue``): ``grader`` (``grader/i18n/locale/``: the grader, the public suites, the
templates; students get it) and ``hidden`` (``tests/hidden/locale/``: what only the hidden suites say).
For each it writes the ``.pot``, merges that into ``ko/LC_MESSAGES/<domain>.po`` (translations kept, new
texts added untranslated, texts gone dropped) and compiles the ``.mo`` the grader reads with the
standard library's gettext. The ``.mo`` is committed, so that a fresh clone, the student bundle and the
Gradescope zip need no compiling step; ``python -m grader.authoring.messages --check`` (a test runs it)
fails when the catalogue or the ``.mo`` is behind the code, and both fail on a translation whose ``{placeholders}``
are not exactly its text's (:func:`mismatched`).

A placeholder is named for what it holds (``{seconds}``, ``{missing}``), not for the expression that computes
it; where that is not plain (a unit, what a list holds, English words inside), a comment starting with
``# i18n:`` on the line right above the ``tr(`` call reaches the translator as the entry's ``#.`` comment.
"""
from __future__ import annotations

import argparse
import ast
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po, write_po

from ..engine import paths
from ..i18n import catalogue
from ..i18n.message import placeholders

LANGUAGES = ("ko",)
KEYWORDS = {"tr": None, "_": None}  # the text is the first argument
COMMENT_TAG = "i18n:"  # `# i18n: ...` right above a call: a comment for the translator
# Each catalogue: its domain, folder and (extraction method, glob under the repository) sources.
CATALOGUES = {
    catalogue.DOMAIN: (catalogue.LOCALE_DIR, (
        ("grader.authoring.messages:extract_suite", "tests/public/test_*.py"),
        ("python", "grader/**/*.py"),
        ("jinja2.ext:babel_extract", "grader/classroom/templates/*.html"),
    )),
    catalogue.HIDDEN_DOMAIN: (catalogue.HIDDEN_LOCALE_DIR, (
        ("grader.authoring.messages:extract_suite", "tests/hidden/test_*.py"),
    )),
}


def pot_path(domain: str) -> Path:
    return CATALOGUES[domain][0] / f"{domain}.pot"


def po_path(domain: str, language: str) -> Path:
    return CATALOGUES[domain][0] / language / "LC_MESSAGES" / f"{domain}.po"


def mo_path(domain: str, language: str) -> Path:
    return po_path(domain, language).with_suffix(".mo")


def extract_suite(fileobj, keywords, comment_tags, options):
    """A test suite's marked texts (as Babel's Python extractor finds them) and its tests' names: the first
    line of each ``test_*`` function's docstring, braces escaped as ``grader.i18n.message.escaped`` does."""
    from babel.messages.extract import extract_python
    source = fileobj.read()
    yield from extract_python(io.BytesIO(source), keywords, comment_tags, options)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            doc = (ast.get_docstring(node, clean=True) or "").strip().splitlines()
            if doc:
                name = doc[0].strip().replace("{", "{{").replace("}", "}}")
                yield node.lineno, "tr", name, ["the name of a test"]


def template(domain: str) -> Catalog:
    """Every text the sources of ``domain`` mark, with where it is; the ``hidden`` catalogue leaves out the
    texts the ``grader`` one already has (they are translated once, there)."""
    pot = Catalog(project="transformer-course-grader", domain=domain, fuzzy=False)
    for method, pattern in CATALOGUES[domain][1]:
        for path in sorted(paths.ROOT.glob(pattern)):
            if "__pycache__" in path.parts:
                continue
            for lineno, text, comments, _context in extract_from_file(
                    method, str(path), keywords=KEYWORDS, comment_tags=(COMMENT_TAG,), strip_comment_tags=True):
                if text:
                    pot.add(text, locations=[(str(path.relative_to(paths.ROOT)), lineno)],
                            auto_comments=comments, flags=("python-brace-format",) if "{" in text else ())
    if domain != catalogue.DOMAIN:
        for m in template(catalogue.DOMAIN):
            if m.id and m.id in pot:
                del pot[m.id]
    return pot


def updated(domain: str, language: str, pot: Catalog) -> Catalog:
    """The catalogue of ``language`` brought up to ``pot`` (its translations kept; no fuzzy guesses)."""
    path = po_path(domain, language)
    if path.exists():
        with open(path, "rb") as f:
            po = read_po(f, locale=language)
    else:
        po = Catalog(locale=language, domain=domain, fuzzy=False)
    po.update(pot, no_fuzzy_matching=True, update_header_comment=False)
    return po


def _po_bytes(cat: Catalog, **kw) -> bytes:
    out = io.BytesIO()
    write_po(out, cat, width=120, omit_header=False, sort_output=False, **kw)
    return out.getvalue()


def _mo_bytes(cat: Catalog) -> bytes:
    out = io.BytesIO()
    write_mo(out, cat, use_fuzzy=False)
    return out.getvalue()


def translated(cat: Catalog) -> dict:
    """msgid -> msgstr of the translated, current (not fuzzy, not obsolete) entries."""
    return {m.id: m.string for m in cat if m.id and m.string and not m.fuzzy}


def read(domain: str, language: str) -> Catalog:
    """The committed ``.po`` of ``domain`` in ``language``."""
    with open(po_path(domain, language), "rb") as f:
        return read_po(f, locale=language)


def compiled(domain: str, language: str) -> dict:
    """msgid -> msgstr of the committed ``.mo``."""
    with open(mo_path(domain, language), "rb") as f:
        return translated(read_mo(f))


def _ids(cat: Catalog) -> set:
    return {m.id for m in cat if m.id}


def mismatched(cat: Catalog) -> list:
    """The translated entries of ``cat`` whose translation has other placeholders than their text, each in a
    line: one left out loses a figure from the feedback, one added (or misspelt) fails when it is rendered."""
    problems = []
    for m in cat:
        if not m.id or not m.string or m.fuzzy:
            continue
        try:
            got = placeholders(m.string)
        except ValueError as exc:  # an unmatched brace
            problems.append(f"{m.id!r}: the translation is not a format string ({exc})")
            continue
        want = placeholders(m.id)
        if got != want:
            problems.append(f"{m.id!r}: the translation lacks {sorted(want - got)} and has {sorted(got - want)}")
    return problems


def _mismatched_at(domain: str, language: str, cat: Catalog) -> list:
    return [f"{po_path(domain, language).relative_to(paths.ROOT)}: {p}" for p in mismatched(cat)]


def behind() -> list:
    """What ``make messages`` would change: files whose content is behind the code or the ``.po``."""
    problems = []
    for domain in CATALOGUES:
        pot = template(domain)
        if not pot_path(domain).exists() or _ids(read_po(open(pot_path(domain), "rb"))) != _ids(pot):
            problems.append(f"{pot_path(domain).relative_to(paths.ROOT)} lists other texts than the code marks")
        for language in LANGUAGES:
            current = read(domain, language)
            if _ids(current) != _ids(pot):
                problems.append(f"{po_path(domain, language).relative_to(paths.ROOT)} lists other texts than the "
                                "code marks")
            if not mo_path(domain, language).exists() or compiled(domain, language) != translated(current):
                problems.append(f"{mo_path(domain, language).relative_to(paths.ROOT)} is not the compiled .po")
    return problems


def write() -> list:
    """Extract, update each catalogue in each language, compile it; what :func:`mismatched` finds."""
    problems = []
    for domain in CATALOGUES:
        pot = template(domain)
        pot_path(domain).parent.mkdir(parents=True, exist_ok=True)
        pot_path(domain).write_bytes(_po_bytes(pot))
        for language in LANGUAGES:
            po = updated(domain, language, pot)
            po_path(domain, language).parent.mkdir(parents=True, exist_ok=True)
            po_path(domain, language).write_bytes(_po_bytes(po, ignore_obsolete=True))
            mo_path(domain, language).write_bytes(_mo_bytes(po))
            print(f"{language}: {len(translated(po))}/{len(_ids(po))} texts translated "
                  f"({po_path(domain, language).relative_to(paths.ROOT)})")
            problems += _mismatched_at(domain, language, po)
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.messages", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say what is behind (exit 1 if anything is)")
    args = parser.parse_args(argv)
    if args.check:
        problems = behind() + [p for domain in CATALOGUES for language in LANGUAGES
                               for p in _mismatched_at(domain, language, read(domain, language))]
    else:
        problems = write()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
