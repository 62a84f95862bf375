"""Defences against hostile MCP servers (on by default; each can be relaxed on ``MCPClient``).

Threats and what answers them:

- **Rug pull**: a server changes a tool's description after the user approved it, to slip new
  instructions to the model, or its annotations, to drop the approval it needs (a tool
  relabelled ``readOnlyHint: true``). Each tool's definition (name, title, description,
  input schema, annotations) is pinned by hash when first registered (``MCPClient.pins``);
  a later change does *not* reach the model: the tool keeps its pinned definition (and
  hints), refuses calls ("server X changed tool Y"), and ``on_tool_change`` is called.
  ``client.accept_tool_changes()`` re-pins (``pin_tools=False`` turns pinning off).
- **Hidden instructions**: characters that print nothing (format and control characters,
  every default-ignorable code point such as Unicode tags, variation selectors and Hangul
  fillers, and blank-rendering ones such as braille blank) and bidirectional controls in
  descriptions and schemas are stripped and flagged (``MCPTool.flags``), so no message can
  be bit-encoded in them; descriptions are capped (``max_description_chars``).
- **Shadowing**: a server tool never replaces a local or another server's tool: registration
  refuses the clash (``prefix=`` keeps both) and ``namesake="override"`` is refused.
- **Flooding**: results are capped (``max_result_chars``; stdio messages at
  ``max_result_bytes`` while they are read).
- **Injected actions**: once a run has taken in open-world content, every tool of an
  *untrusted* server (``trust="untrusted"``, the default) that is not marked
  ``readOnlyHint: true`` requires a human's approval, so a prompt injected through a tool
  result cannot silently trigger a destructive call. Open-world content is: the result of a
  server tool marked ``openWorldHint: true`` (the web...), which counts for every server; the
  result of any other tool of an untrusted server, which counts for the *other* servers'
  tools (another server's output), even when the server marks it ``openWorldHint: false``:
  a server's own claims never lower the trust the user configured; anything passed to
  :func:`mark_untrusted_content`. ``trust="trusted"`` relaxes this per server (and only a
  trusted server's ``openWorldHint: false`` is believed).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentkit.tools._response import ToolResponse, ToolResultContent
from agentkit.tools._toolkit import UNTAINTED, Toolkit

__all__ = [
    "ToolChange",
    "cap_result",
    "clean_schema",
    "clean_text",
    "definition_hash",
    "is_tainted",
    "mark_untrusted_content",
    "reset_untrusted_content",
]

# Where open-world content came from, kept per toolkit (``Toolkit.tainted_by``): "*" is
# anywhere (the web...), a server's name is that server's output, which is untrusted input
# for the *other* servers' tools.
ANYWHERE = "*"


@dataclass(frozen=True, slots=True)
class ToolChange:
    """A server changed a pinned tool's definition."""

    server: str
    tool: str
    old_hash: str
    new_hash: str
    new_description: str


# Code points that print nothing yet reach the model, so they can carry hidden text (one bit
# each): Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt,
# Unicode 16.0; the set is stable by policy) plus those that render blank without being
# default-ignorable: braille pattern blank (So) and the musical null notehead. Half-open
# ranges, sorted. Categories Cf (format), Cs (lone surrogates) and Cc (controls but tab and
# newlines) are checked apart, so a format character of a later Unicode version is caught.
_BLANK_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AE),  # soft hyphen
    (0x034F, 0x0350),  # combining grapheme joiner
    (0x061C, 0x061D),  # Arabic letter mark
    (0x115F, 0x1161),  # Hangul choseong / jungseong fillers
    (0x17B4, 0x17B6),  # Khmer inherent vowels
    (0x180B, 0x1810),  # Mongolian free variation selectors, vowel separator
    (0x200B, 0x2010),  # zero-width space/joiners, LRM/RLM
    (0x202A, 0x202F),  # bidi embeddings and overrides
    (0x2060, 0x2070),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x2800, 0x2801),  # braille pattern blank (not default-ignorable, but blank)
    (0x3164, 0x3165),  # Hangul filler
    (0xFE00, 0xFE10),  # variation selectors 1-16
    (0xFEFF, 0xFF00),  # zero-width no-break space (BOM)
    (0xFFA0, 0xFFA1),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF9),  # unassigned, default-ignorable
    (0x1BCA0, 0x1BCA4),  # shorthand format controls
    (0x1D159, 0x1D15A),  # musical symbol null notehead (blank)
    (0x1D173, 0x1D17B),  # musical symbol begin/end beam, tie, slur, phrase
    (0xE0000, 0xE1000),  # language tag, tag characters, variation selectors 17-256, reserved
)
_BLANK_STARTS = tuple(start for start, _ in _BLANK_RANGES)
_KEPT_CONTROLS = frozenset("\t\n\r")


def _invisible(char: str) -> bool:
    """Whether ``char`` prints nothing (or reorders text) and so could hide instructions."""
    category = unicodedata.category(char)
    if category in ("Cf", "Cs") or (category == "Cc" and char not in _KEPT_CONTROLS):
        return True
    code = ord(char)
    i = bisect.bisect_right(_BLANK_STARTS, code) - 1
    return i >= 0 and code < _BLANK_RANGES[i][1]


def _plain_spaces(text: str) -> str:
    """Every space character (category Zs) as U+0020: nothing the reader sees changes.

    Two kinds of space would be one bit each: spaces of several widths carry no message.
    """
    if text.isascii():
        return text
    return "".join(" " if c != " " and unicodedata.category(c) == "Zs" else c for c in text)


def clean_text(text: str, max_chars: int | None = None) -> tuple[str, list[str]]:
    """``text`` without invisible/bidi characters, capped; and what was found.

    Removed: format and control characters (categories Cf, Cc; tab and newlines kept),
    every default-ignorable code point and the blank-rendering ones (Hangul fillers,
    braille blank...). Other spaces become plain spaces.
    """
    flags: list[str] = []
    text = _plain_spaces(text)
    kept = "".join(c for c in text if not _invisible(c))
    if len(kept) != len(text):
        hidden = sorted({f"U+{ord(c):04X}" for c in text if _invisible(c)})
        flags.append(
            f"{len(text) - len(kept)} invisible/bidi characters removed ({', '.join(hidden[:8])})"
        )
    if max_chars is not None and len(kept) > max_chars:
        flags.append(f"description cut from {len(kept)} to {max_chars} characters")
        kept = kept[:max_chars] + " [... cut by agentkit]"
    return kept, flags


def clean_schema(value: Any, flags: list[str]) -> Any:
    """A JSON schema with invisible characters removed from every string value.

    Property names are kept (the server needs them) but flagged when they hide characters.
    """
    if isinstance(value, str):
        cleaned, found = clean_text(value)
        flags.extend(f"schema: {f}" for f in found)
        return cleaned
    if isinstance(value, list):
        return [clean_schema(v, flags) for v in value]
    if isinstance(value, dict):
        for key in value:
            if isinstance(key, str) and any(_invisible(c) for c in key):
                flags.append(f"schema key {key!r} contains invisible characters")
        return {k: clean_schema(v, flags) for k, v in value.items()}
    return value


def definition_hash(
    name: str,
    description: str | None,
    schema: object,
    *,
    title: str | None = None,
    annotations: Mapping[str, object] | None = None,
) -> str:
    """A stable hash of what the model is told about a tool, and of what it claims.

    The annotations are pinned too: ``readOnlyHint`` decides whether a tool needs approval,
    so a server relabelling a pinned tool read-only is changing its definition. A title and
    annotations the server did not send are left out of the payload, so the hash of a tool
    without them is the one earlier versions pinned.
    """
    fields: dict[str, object] = {
        "name": name,
        "description": description or "",
        "inputSchema": schema,
    }
    if title is not None:
        fields["title"] = title
    if annotations:
        fields["annotations"] = dict(annotations)
    payload = json.dumps(fields, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def cap_result(response: ToolResponse, max_chars: int | None) -> ToolResponse:
    """Cut the text of ``response`` to ``max_chars`` in all, with a note saying so."""
    if max_chars is None:
        return response
    total = sum(len(b["text"]) for b in response.content if b["type"] == "text")
    if total <= max_chars:
        return response
    left = max_chars
    blocks: list[ToolResultContent] = []
    for block in response.content:
        if block["type"] != "text":
            blocks.append(block)
            continue
        blocks.append({"type": "text", "text": block["text"][: max(left, 0)]})
        left -= len(block["text"])
    note = (
        f"\n[truncated by agentkit: {total:,} characters of output, over the {max_chars:,} "
        "limit (MCPClient(max_result_chars=...))"
    )
    mcp_meta = (response.metadata or {}).get("mcp_meta")
    cut = mcp_meta.get("agentkit/truncated") if isinstance(mcp_meta, dict) else None
    if isinstance(cut, dict):  # already cut while read: say how big the answer really was
        note += f"; the server's answer was {cut.get('size', 0):,} bytes"
    note += "]"
    blocks.append({"type": "text", "text": note})
    metadata = {**(response.metadata or {}), "truncated": {"chars": total, "limit": max_chars}}
    return ToolResponse(content=blocks, metadata=metadata, is_error=response.is_error)


def mark_untrusted_content(toolkit: Toolkit, source: str = ANYWHERE) -> None:
    """Record that a run on ``toolkit`` took in open-world content (see module docs).

    Adds ``source`` to ``toolkit.tainted_by``.

    Args:
        toolkit: The Toolkit whose run read the content.
        source: ``"*"`` (the default: the web, a file from anyone) makes every untrusted
            server's non-read-only tools need approval; a server's name exempts that
            server's own tools (its output is untrusted input for the others).
    """
    # Replaced, not mutated: an untainted toolkit shares the one empty frozenset (no set
    # per toolkit), and a copy can share its parent's value.
    toolkit.tainted_by = toolkit.tainted_by | {source}


def reset_untrusted_content(toolkit: Toolkit) -> None:
    """Forget it (e.g. when a new conversation starts on the same toolkit)."""
    toolkit.tainted_by = UNTAINTED


def is_tainted(toolkit: object, for_server: str | None = None) -> bool:
    """Whether open-world content from outside ``for_server`` entered a run on ``toolkit``."""
    if not isinstance(toolkit, Toolkit):
        return False
    sources = toolkit.tainted_by
    return ANYWHERE in sources or any(s != for_server for s in sources)
