"""Which language a command speaks: ``--lang``, else the environment (``check``) or course.toml (the rest)."""
from __future__ import annotations

import os
from pathlib import Path

LANGUAGES = ("en", "ko", "both")  # "both": Korean, with the English beneath
COURSE_TOML = Path(__file__).resolve().parents[2] / "course.toml"  # the repository's


def from_environment(environ=None) -> str:
    """The student's language from the locale variables, as gettext reads them (LANGUAGE, LC_ALL,
    LC_MESSAGES, LANG; the first one set wins): "ko" for ko_KR.UTF-8 and the like, else "en"."""
    environ = os.environ if environ is None else environ
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            return "ko" if value.split(":")[0].lower().startswith("ko") else "en"
    return "en"


def from_course(course_toml=None) -> str:
    """The course's language: ``language`` at the top of course.toml (the repository's unless given);
    "en" when the file or the key is missing (the student bundle has no course.toml)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    path = Path(course_toml) if course_toml else COURSE_TOML
    if not path.exists():
        return "en"
    with open(path, "rb") as f:
        return choose(tomllib.load(f).get("language"), default="en")


def for_command(command: str, given: str | None, course_toml=None) -> str:
    """The language of what ``command`` says to students: ``given`` (``--lang``), else the student's locale for
    ``check`` and the course's (course.toml ``language``) for the instructor's commands."""
    return choose(given, default=from_environment() if command == "check" else from_course(course_toml))


def choose(given: str | None, *, default: str) -> str:
    """``given`` (``--lang``) if any, else ``default``; a language the grader does not speak is a ValueError."""
    language = given or default
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}: choose one of {', '.join(LANGUAGES)}")
    return language
