"""Defences against hostile MCP servers (on by default; each can be relaxed on ``MCPClient``).

Threats and what answers them:

- **Rug pull**: a server changes a tool's description after the user approved it, to slip new
  instructions to the model. Each tool's definition (name, description, input schema) is
  pinned by hash when first registered (``MCPClient.pins``); a later change does *not* reach
  the model: the tool keeps its pinned definition, refuses calls ("server X changed tool Y"),
  and ``on_tool_change`` is called. ``client.accept_tool_changes()`` re-pins
  (``pin_tools=False`` turns pinning off).
- **Hidden instructions**: invisible characters (zero-width, Unicode tags) and bidirectional
  controls in descriptions and schemas are stripped and flagged (``MCPTool.flags``);
  descriptions are capped (``max_description_chars``).
- **Shadowing**: a server tool never replaces a local or another server's tool: registration
  refuses the clash (``prefix=`` keeps both) and ``namesake="override"`` is refused.
- **Flooding**: results are capped (``max_result_chars``; stdio messages at
  ``max_result_bytes`` while they are read).
- **Injected actions**: once a run has taken in open-world content, every tool of an
  *untrusted* server (``trust="untrusted"``, the default) that is not marked
  ``readOnlyHint: true`` requires a human's approval, so a prompt injected through a tool
  result cannot silently trigger a destructive call. Open-world content is: the result of a
  server tool marked ``openWorldHint: true`` (the web...), which counts for every server; the
  result of a server tool without the hint, which counts for the *other* servers' tools
  (another server's output); anything passed to :func:`mark_untrusted_content`.
  ``trust="trusted"`` relaxes this per server.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import weakref
from dataclasses import dataclass
from typing import Any

from agentkit.tools._response import ToolResponse, ToolResultContent

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

# Per toolkit: where open-world content came from ("*": anywhere, e.g. the web; a server name:
# that server's output, which is untrusted input for the *other* servers' tools).
_TAINTED: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
ANYWHERE = "*"


@dataclass(frozen=True, slots=True)
class ToolChange:
    """A server changed a pinned tool's definition."""

    server: str
    tool: str
    old_hash: str
    new_hash: str
    new_description: str


def _invisible(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.category(char) == "Cf"  # zero-width, bidi controls, soft hyphen...
        or 0xE0000 <= code <= 0xE007F  # Unicode tags: invisible ASCII look-alikes
        or 0xFE00 <= code <= 0xFE0F  # variation selectors (can smuggle bytes)
        or 0xE0100 <= code <= 0xE01EF
    )


def clean_text(text: str, max_chars: int | None = None) -> tuple[str, list[str]]:
    """``text`` without invisible/bidi characters, capped; and what was found."""
    flags: list[str] = []
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


def definition_hash(name: str, description: str | None, schema: object) -> str:
    """A stable hash of what the model is told about a tool."""
    payload = json.dumps(
        {"name": name, "description": description or "", "inputSchema": schema},
        sort_keys=True,
        ensure_ascii=True,
        default=str,
    )
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


def mark_untrusted_content(toolkit: object, source: str = ANYWHERE) -> None:
    """Record that a run on ``toolkit`` took in open-world content (see module docs).

    Args:
        toolkit: The Toolkit whose run read the content.
        source: ``"*"`` (the default: the web, a file from anyone) makes every untrusted
            server's non-read-only tools need approval; a server's name exempts that
            server's own tools (its output is untrusted input for the others).
    """
    _TAINTED.setdefault(toolkit, set()).add(source)


def reset_untrusted_content(toolkit: object) -> None:
    """Forget it (e.g. when a new conversation starts on the same toolkit)."""
    _TAINTED.pop(toolkit, None)


def is_tainted(toolkit: object, for_server: str | None = None) -> bool:
    """Whether open-world content from outside ``for_server`` entered a run on ``toolkit``."""
    if toolkit is None:
        return False
    sources = _TAINTED.get(toolkit, set())
    return ANYWHERE in sources or any(s != for_server for s in sources)
