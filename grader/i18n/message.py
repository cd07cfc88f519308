"""Marked text (:func:`tr`) and rendering it in a language (:func:`render`, :func:`localize`).

A :class:`Message` is a ``str`` (its English rendering: code that compares or searches feedback keeps
working) that also carries its msgid and its placeholders' values. Values may be Messages themselves
(a hint inside a comparison's message): they are rendered in the same language. A Message crosses the
pytest session's JSON file as ``{"msgid": ..., "params": {...}}`` (:meth:`Message.to_json`).
"""
from __future__ import annotations

import string

from . import catalogue

_FORMATTER = string.Formatter()


def placeholders(text: str) -> set:
    """The names of the ``{name}`` placeholders in ``text``."""
    return {name for _, name, _, _ in _FORMATTER.parse(text) if name}


class Message(str):
    """A student-facing text: its English rendering, with what it takes to render it in another language."""

    msgid: str | None
    params: dict
    parts: tuple  # a join of messages (``join``): msgid is None, ``params["sep"]`` separates them

    def __new__(cls, msgid: str | None, params: dict | None = None, parts: tuple = ()):
        params = dict(params or {})
        self = super().__new__(cls, _render(msgid, params, parts, "en"))
        self.msgid, self.params, self.parts = msgid, params, tuple(parts)
        return self

    def __reduce__(self):  # pickled across processes (a batch's executors) as what it is
        return Message, (self.msgid, self.params, self.parts)

    def to_json(self):
        if self.msgid is None:
            return {"join": [to_json(p) for p in self.parts], "sep": self.params.get("sep", "")}
        return {"msgid": self.msgid, "params": {k: to_json(v) for k, v in self.params.items()}}


def to_json(value):
    """A Message as JSON (recursively); any other value as its ``str``."""
    return value.to_json() if isinstance(value, Message) else str(value)


def from_json(data) -> Message | str:
    """The inverse of :func:`to_json` (a plain string stays a string)."""
    if isinstance(data, dict) and "join" in data:
        return join([from_json(p) for p in data["join"]], data.get("sep", ""))
    if isinstance(data, dict) and "msgid" in data:
        return Message(data["msgid"], {k: from_json(v) for k, v in data.get("params", {}).items()})
    return data


def escaped(text: str) -> Message:
    """``text`` as a msgid with no placeholders (a test's docstring: its braces are literal)."""
    return Message(text.replace("{", "{{").replace("}", "}}"))


def shortened(value, limit: int):
    """``value`` cut to ``limit`` characters; a Message stays one when its English rendering fits (a longer
    one becomes its cut English rendering: the limit guards against flooding, not against translation)."""
    if isinstance(value, Message) and len(value) <= limit:
        return value
    return str(value)[:limit]


def of(exc: BaseException) -> Message | str:
    """What an exception says: the marked text it was raised with, else its ``str``."""
    given = exc.args[0] if exc.args else ""
    return given if isinstance(given, Message) else str(exc)


def tr(msgid: str, **params) -> Message:
    """Mark ``msgid`` (English, ``{name}`` placeholders filled from ``params``) as student-facing text."""
    missing = placeholders(msgid) - set(params)
    if missing:
        raise KeyError(f"tr({msgid!r}): no value for {sorted(missing)}")
    return Message(msgid, params)


def join(parts, sep: str = "; ") -> Message:
    """Messages (or plain strings) one after the other, each rendered in the language of the whole."""
    parts = tuple(p for p in parts if p)
    return Message(None, {"sep": sep}, parts)


def _render(msgid, params, parts, language: str) -> str:
    if msgid is None:
        return params.get("sep", "").join(render(p, language) for p in parts)
    text = catalogue.gettext(msgid, language)
    return text.format_map({k: render(v, language) for k, v in params.items()})


def render(value, language: str) -> str:
    """``value`` in ``language`` ("en", "ko", or "both": Korean, then English on the next line where they
    differ); anything that is not a Message is returned as it is."""
    if not isinstance(value, Message):
        return value
    if language == "both":
        ko, en = _render(value.msgid, value.params, value.parts, "ko"), str(value)
        return ko if ko == en else f"{ko}\n{en}"
    return _render(value.msgid, value.params, value.parts, language)


def localize(data, language: str):
    """``data`` (a report: dicts, lists) with every Message rendered in ``language``."""
    if isinstance(data, dict):
        return {k: localize(v, language) for k, v in data.items()}
    if isinstance(data, list):
        return [localize(v, language) for v in data]
    return render(data, language) if isinstance(data, Message) else data
