"""The compiled catalogues (``locale/<lang>/LC_MESSAGES/grader.mo``), read with the standard library's gettext.

English is the source language: its "catalogue" is the msgids themselves.
"""
from __future__ import annotations

import gettext as _gettext
from functools import cache
from pathlib import Path

DOMAIN = "grader"
LOCALE_DIR = Path(__file__).with_name("locale")


@cache
def translations(language: str) -> _gettext.NullTranslations:
    """The catalogue of ``language`` (the msgids themselves for English)."""
    if language == "en":
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, LOCALE_DIR, languages=[language])


def gettext(msgid: str, language: str) -> str:
    """``msgid`` in ``language``; a msgid the catalogue does not translate stays English."""
    return translations(language).gettext(msgid)
