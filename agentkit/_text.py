r"""Valid Unicode at the boundaries: text from outside never poisons a conversation.

Python strings can hold *lone surrogates* (code points U+D800..U+DFFF outside a pair), which
no UTF-8 encoder accepts: an OS file name with an undecodable byte (``os.fsdecode`` escapes
byte ``0xE9`` as ``"\udce9"``), a JSON ``"\ud83d"`` escape without its partner (an emoji
split across two stream chunks), a tool returning ``"\ud800"``. Stored in memory, such a
string makes every later model request and session save raise ``UnicodeEncodeError``.

Every text that enters memory from outside goes through :func:`clean_text` (or
:func:`clean_json` for nested data) where it arrives, and :class:`StreamText` joins streamed
pieces, so serializers never discover the problem. Replacements are visible: an escaped
byte becomes the four characters ``\xNN``, any other lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "StreamText",
    "clean_json",
    "clean_text",
    "copy_json",
    "is_clean",
    "progress_counter",
    "terminal_safe",
    "too_deep",
]

MAX_JSON_DEPTH = 100
"""Deepest nesting of JSON data accepted from outside (tool arguments, block data).

Deeper data is refused where it arrives: every later walk of it (copying, validating,
encoding a request, saving a session) would otherwise raise ``RecursionError``."""

_LONE = re.compile("[\ud800-\udfff]")
_HIGH_FIRST, _HIGH_LAST = "\ud800", "\udbff"


def _replace(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte escaped by ``surrogateescape``: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return "\ufffd"


def is_clean(text: str) -> bool:
    """Whether ``text`` encodes to UTF-8 (holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(text: str) -> str:
    r"""Return ``text`` as valid Unicode (the same object when it already is).

    A surrogate pair stored as two code points is joined into its character; a byte escaped
    by ``surrogateescape`` becomes the visible text ``\xNN``; any other lone surrogate
    becomes U+FFFD.
    """
    if text.isascii() or is_clean(text):  # isascii inline: one call less per message text
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE.sub(_replace, joined)


def clean_json(value: Any) -> Any:
    """Return ``value`` (JSON-like data) with every string cleaned by :func:`clean_text`.

    Dicts and lists are rebuilt only when something inside them changed, so clean data
    comes back as the very same object.

    Raises:
        ValueError: when ``value`` is nested deeper than :data:`MAX_JSON_DEPTH`.
    """
    if _all_clean(value, 0):  # the common case: one cheap walk, nothing rebuilt
        return value
    return _clean(value, 0)


_SCALARS = frozenset((int, float, bool, type(None)))


def _all_clean(value: Any, depth: int) -> bool:
    """Whether ``value`` holds no lone surrogate (exact JSON types only; else False)."""
    kind = type(value)
    if kind is str:
        return value.isascii() or is_clean(value)
    if kind in _SCALARS:
        return True
    if kind is not dict and kind is not list:
        return not isinstance(value, str | dict | list)  # a subclass: let _clean decide
    if depth >= MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if kind is dict:
        for key, item in value.items():
            if type(key) is str and not (key.isascii() or is_clean(key)):
                return False
            if type(item) not in _SCALARS and not _all_clean(item, depth + 1):
                return False
        return True
    return all(type(item) in _SCALARS or _all_clean(item, depth + 1) for item in value)


def _clean(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, dict | list):
        return value
    if depth >= MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, list):
        cleaned = [_clean(item, depth + 1) for item in value]
        return cleaned if any(a is not b for a, b in zip(cleaned, value, strict=True)) else value
    changed = False
    items = []
    for key, item in value.items():
        new_key = clean_text(key) if isinstance(key, str) else key
        new_item = _clean(item, depth + 1)
        changed = changed or new_key is not key or new_item is not item
        items.append((new_key, new_item))
    return dict(items) if changed else value


def too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON-like ``value`` nests more than ``limit`` dicts/lists (no recursion)."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        if not level:
            return False
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
    return bool(level)


class StreamText:
    """Streamed text pieces joined into valid Unicode.

    A high surrogate that ends a piece is held back until the next piece (its partner may
    arrive there), so a snapshot never shows half a pair; :meth:`value` with ``final=True``
    turns a partner that never came into U+FFFD.
    """

    __slots__ = ("_held", "text")

    def __init__(self) -> None:
        self.text = ""
        self._held = ""

    def add(self, piece: str) -> None:
        """Append one streamed piece."""
        if not piece:
            return
        if self._held:
            piece, self._held = self._held + piece, ""
        if piece.isascii():
            self.text += piece
            return
        if _HIGH_FIRST <= piece[-1] <= _HIGH_LAST:
            piece, self._held = piece[:-1], piece[-1]
        self.text += clean_text(piece)

    def value(self, *, final: bool = False) -> str:
        """The text so far; with ``final``, a held half pair is resolved (to U+FFFD)."""
        if final and self._held:
            self.text += clean_text(self._held)
            self._held = ""
        return self.text

    def __bool__(self) -> bool:
        return bool(self.text or self._held)


# What a terminal would act on instead of showing: C0 controls but newline and tab (ESC
# starts CSI/OSC sequences: colours, cursor moves, OSC 52 clipboard writes, window titles;
# a lone CR overwrites the line), DEL, the C1 controls (U+009B is an 8-bit CSI), and the
# bidirectional overrides and isolates that reorder what is shown.
_CONTROL = re.compile("\r(?!\n)|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    r"""``text`` with every control sequence neutralized, for printing to a terminal.

    Text from outside (model answers, tool output, MCP servers, file names) may carry
    escape sequences that recolour the terminal, move the cursor over what was printed,
    set the clipboard (OSC 52) or the window title. Control characters other than newline
    and tab are shown as ``\xNN`` (``\x1b`` for ESC, ``\r`` for a carriage return that is
    not part of CRLF), bidirectional overrides as ``\uNNNN``; the text stays readable and
    nothing is executed by the terminal. Lone surrogates are made valid too.
    """
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub(_visible, clean_text(text))


def progress_counter(metadata: dict[str, object] | None) -> str:
    """A progress chunk's ``progress/total`` ("" when it reports no number)."""
    meta = metadata or {}
    done, total = meta.get("progress"), meta.get("total")
    if not isinstance(done, int | float):
        return ""
    return f"{done:g}/{total:g}" if isinstance(total, int | float) and total else f"{done:g}"


def copy_json(value: Any) -> Any:
    """Copy nested dicts/lists (JSON data) without ``copy.deepcopy``'s memo overhead.

    Strings and numbers are shared (immutable), so comparing a copy with its original finds
    them identical without reading them.
    """
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value
