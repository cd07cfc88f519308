"""Everything the grader says to a student, in the student's language (English or Korean).

Student-facing text is written in English in the code, marked with :func:`tr`, and translated through
one gettext catalogue (``locale/ko/LC_MESSAGES/grader.po``, compiled to ``grader.mo``; ``make messages``
extracts, updates and compiles it with Babel). A marked text is a :class:`Message`: English as a ``str``,
its msgid and placeholders kept, so a report is rendered in any language once its tests have run
(``localize``) and both languages show the same figures.
"""
from .languages import LANGUAGES, choose, from_environment
from .message import Message, join, localize, of, render, tr

__all__ = ["LANGUAGES", "Message", "choose", "from_environment", "join", "localize", "of", "render", "tr"]
