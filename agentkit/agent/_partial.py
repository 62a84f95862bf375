"""Partial structured output while streaming: a tolerant JSON prefix parser and its tracker.

While a structured answer streams (the response tool's arguments, or the JSON text of a
native or prompted answer), :class:`PartialTracker` parses the JSON received so far and
emits a ``PartialOutput`` event each time the parsed value changes and still validates
against the output type with missing fields allowed.

The parser reads a *prefix* of a JSON document and closes what is open: an unfinished
string is kept as far as it goes, unfinished objects and arrays are closed, and a value
that cannot be read yet (a key without its value, ``tru``, a lone ``-``) is left out. A
longer prefix therefore never loses a key a shorter one had: fields never disappear
between events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from agentkit.events import PartialOutput

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent._state import Emit
    from agentkit.models._base import ChatResponse
    from agentkit.models._json import JSONObject, JSONValue

__all__ = ["PartialTracker", "parse_partial_json", "partial_ok"]

_WS = " \t\r\n"
_LITERALS = {"true": True, "false": False, "null": None}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_NUMBER_CHARS = frozenset("+-0123456789.eE")


class _Missing:
    """A value not readable yet (its key is left out)."""


_MISSING = _Missing()

Read: TypeAlias = "JSONValue | _Missing"
"""A value read from the prefix, or ``_MISSING`` when none is readable yet."""
Source: TypeAlias = "Callable[[ChatResponse], tuple[type[BaseModel], object] | None]"
"""Finds the structured answer in a chunk: its model and its JSON so far (None: none yet)."""


class _Parser:
    """One pass over a JSON prefix; ``eof`` is set once the text ran out."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.eof = False

    def ended(self) -> bool:
        # A method, not the attribute: every read sees the parser's current state.
        return self.eof

    def ws(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in _WS:
            self.i += 1
        if self.i >= len(self.text):
            self.eof = True

    def value(self) -> Read:
        self.ws()
        if self.ended():
            return _MISSING
        c = self.text[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.array()
        if c == '"':
            return self.string(keep_partial=True)
        if c in _NUMBER_CHARS:
            return self.number()
        return self.literal()

    def obj(self) -> JSONObject:
        self.i += 1
        out: JSONObject = {}
        while True:
            self.ws()
            if self.ended():
                return out
            c = self.text[self.i]
            if c == "}":
                self.i += 1
                return out
            if c == ",":
                self.i += 1
                continue
            if c != '"':
                raise ValueError(f"expected a key at {self.i}")
            key = self.string(keep_partial=False)
            if self.ended() or not isinstance(key, str):
                return out
            self.ws()
            if self.ended():
                return out
            if self.text[self.i] != ":":
                raise ValueError(f"expected ':' at {self.i}")
            self.i += 1
            value = self.value()
            if not isinstance(value, _Missing):
                out[key] = value
            if self.ended():
                return out

    def array(self) -> list[JSONValue]:
        self.i += 1
        out: list[JSONValue] = []
        while True:
            self.ws()
            if self.ended():
                return out
            c = self.text[self.i]
            if c == "]":
                self.i += 1
                return out
            if c == ",":
                self.i += 1
                continue
            value = self.value()
            if not isinstance(value, _Missing):
                out.append(value)
            if self.ended():
                return out

    def string(self, *, keep_partial: bool) -> str | _Missing:
        text, i = self.text, self.i + 1
        parts: list[str] = []
        while i < len(text):
            c = text[i]
            if c == '"':
                self.i = i + 1
                return "".join(parts)
            if c == "\\":
                if i + 1 >= len(text):
                    break  # an escape cut in two: left out until it is whole
                e = text[i + 1]
                if e == "u":
                    digits = text[i + 2 : i + 6]
                    if len(digits) < 4:
                        break
                    parts.append(chr(int(digits, 16)))
                    i += 6
                    continue
                parts.append(_ESCAPES.get(e, e))
                i += 2
                continue
            parts.append(c)
            i += 1
        self.i, self.eof = len(text), True
        return "".join(parts) if keep_partial else _MISSING

    def number(self) -> Read:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in _NUMBER_CHARS:
            self.i += 1
        raw = self.text[start : self.i]
        if self.i >= len(self.text):
            self.eof = True
            # The longest prefix that is a number ("1." -> 1, "2e" -> 2; "-" -> left out).
            for end in range(len(raw), 0, -1):
                try:
                    number: JSONValue = json.loads(raw[:end])
                    return number
                except ValueError:
                    continue
            return _MISSING
        whole: JSONValue = json.loads(raw)
        return whole

    def literal(self) -> Read:
        for word, value in _LITERALS.items():
            if self.text.startswith(word, self.i):
                self.i += len(word)
                return value
        rest = self.text[self.i :]
        if any(word.startswith(rest) for word in _LITERALS):
            self.i, self.eof = len(self.text), True
            return _MISSING
        raise ValueError(f"unexpected {rest[:10]!r} at {self.i}")


def parse_partial_json(text: str) -> JSONValue:
    """The value of a JSON prefix, open strings/arrays/objects closed (None: nothing yet).

    Text before the first ``{`` (a code fence, a sentence) is skipped: prompted answers
    often start so. Invalid JSON gives None, never an exception.
    """
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = _Parser(text[start:]).value()
    except (ValueError, IndexError):
        return None
    return None if isinstance(value, _Missing) else value


def partial_ok(model: type[BaseModel], data: object) -> bool:
    """Whether ``data`` validates against ``model`` with missing fields allowed.

    It does when every validation error is a missing field (at any depth).
    """
    from pydantic import ValidationError

    try:
        model.model_validate(data)
    except ValidationError as exc:
        return all(error["type"] == "missing" for error in exc.errors())
    return True


class PartialTracker:
    """Emits ``PartialOutput`` events for one streamed model answer.

    Args:
        emit: The run's event sink.
        source: Reads a cumulative chunk: the model the answer must match (a union's
            member, by the tool called) and the JSON text so far, or None when the chunk
            holds no structured answer yet.
    """

    __slots__ = ("_source", "emit", "last")

    def __init__(self, emit: Emit, source: Source) -> None:
        self.emit = emit
        self._source = source
        self.last: dict[str, object] | None = None

    def update(self, chunk: ChatResponse) -> None:
        """Emit the partial of ``chunk`` when it changed and validates."""
        found = self._source(chunk)
        if found is None:
            return
        model, raw = found
        # Tool arguments arrive parsed (a dict) or as their JSON text so far.
        value = parse_partial_json(raw) if isinstance(raw, str) else raw
        if not isinstance(value, dict):
            return
        partial: dict[str, object] = dict(value)  # a copy: the event keeps this snapshot
        if partial == self.last or not partial_ok(model, partial):
            return
        self.last = partial
        self.emit(PartialOutput(partial))
