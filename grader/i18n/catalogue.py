"""The compiled catalogues, read with the standard library's gettext.

Two catalogues (gettext domains), because the students' copy must not hold the hidden suites' feedback:

* ``grader``: the grader, the public suites and the HTML templates, in ``grader/i18n/locale/`` (it ships
  with the student bundle, the GitHub template and the Gradescope zip);
* ``hidden``: what only the hidden suites say, in ``tests/hidden/locale/`` (it stays where the hidden
  suites are: the course repository and the Gradescope zip).

A text is looked up in ``grader``, then in ``hidden``; English is the source language (its "catalogue" is
the msgids themselves), and a text neither translates stays English.
"""
from __future__ import annotations

import gettext as _gettext
from functools import cache
from pathlib import Path

DOMAIN = "grader"
LOCALE_DIR = Path(__file__).with_name("locale")
HIDDEN_DOMAIN = "hidden"
HIDDEN_LOCALE_DIR = Path(__file__).resolve().parents[2] / "tests" / "hidden" / "locale"


@cache
def translations(language: str) -> _gettext.NullTranslations:
    """The catalogues of ``language`` chained (the msgids themselves for English)."""
    if language == "en":
        return _gettext.NullTranslations()
    found = _gettext.translation(DOMAIN, LOCALE_DIR, languages=[language])
    found.add_fallback(_gettext.translation(HIDDEN_DOMAIN, HIDDEN_LOCALE_DIR, languages=[language], fallback=True))
    return found


def gettext(msgid: str, language: str) -> str:
    """``msgid`` in ``language``; a msgid no catalogue translates stays English."""
    return translations(language).gettext(msgid)
