"""Helpers shared by the ready-made toolkits: root confinement, output limits, decoding."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from agentkit.tools import Toolkit

__all__ = [
    "decode_text",
    "escape_name",
    "looks_binary",
    "resolve_inside",
    "target_toolkit",
    "truncate_middle",
]


def resolve_inside(root: Path, path: str) -> Path:
    """Resolve ``path`` (relative to ``root``, or absolute) and refuse it outside ``root``.

    Every symlink is resolved (``os.path.realpath``), so ``../``, absolute paths and symlinks
    that point elsewhere are all caught by one check on the final, canonical path.

    Args:
        root: The allowed root; must already be canonical (``Path.resolve()``).
        path: What the caller asked for.

    Returns:
        The canonical path, guaranteed to be ``root`` or below it.

    Raises:
        PermissionError: The path escapes the root.
        ValueError: The path is malformed (contains a NUL byte).
    """
    if "\x00" in path:
        raise ValueError("invalid path: it contains a NUL byte")
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = Path(os.path.realpath(candidate))
    if resolved != root and not resolved.is_relative_to(root):
        raise PermissionError(
            f"access denied: {path!r} resolves outside the allowed root directory"
        )
    return resolved


# Bidirectional controls reorder what a reader sees ("evil\u202etxt.exe"); listed because
# most are "format" characters (category Cf) that str.isprintable() does not single out.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_name(name: str) -> str:
    r"""A file name (or path) made safe to show: valid Unicode, one line, no reordering.

    A byte that is not UTF-8 reaches Python as a lone surrogate (``surrogateescape``), which
    no JSON encoder or model API accepts: it is shown as ``\xNN``. Control characters,
    line separators and bidirectional overrides are shown as ``\n``, ``\x1b``,
    ``\u202e``... so a listing cannot be forged or reordered by a name.
    """
    if name.isprintable() and _BIDI.isdisjoint(name):
        return name
    return "".join(_escape_char(c) for c in name)


def _escape_char(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, surrogate-escaped by the OS layer
        return f"\\x{code - 0xDC00:02x}"
    if c in _BIDI or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp"):
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return c


def looks_binary(sample: bytes) -> bool:
    """Heuristic used by editors and grep: a NUL byte in the first block means binary."""
    return b"\x00" in sample


def decode_text(data: bytes, encoding: str = "utf-8") -> str:
    """Decode bytes leniently: undecodable bytes become U+FFFD instead of failing."""
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:  # unknown charset name from a server or a file header
        return data.decode("utf-8", errors="replace")


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters, with a note.

    Commands and pages put the useful parts at both ends (a header, a final error), so the
    middle is what gets dropped.
    """
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n[... {dropped} characters truncated ...]\n{text[len(text) - tail :]}"


def target_toolkit(into: Toolkit | None, group: str, description: str) -> Toolkit:
    """The Toolkit a factory registers into, with ``group`` created if it is missing.

    A missing group is created inactive (as ``create_tool_group`` does): the agent or the
    application activates it.
    """
    tk = into if into is not None else Toolkit()
    if group not in tk.groups:
        tk.create_tool_group(group, description)
    return tk
