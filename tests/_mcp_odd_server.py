"""A raw JSON-RPC (handshake-era) MCP stdio server with awkward tool definitions.

Written without the SDK so it can send what SDK servers refuse to: tool names that providers
reject (dots, spaces, over 64 characters, names that collide once sanitised) and input
schemas that are empty, untyped or use ``$ref``. ``python _mcp_odd_server.py [N_EXTRA] [--colliding] [--untyped]``
adds N_EXTRA plain tools (a huge tool list). Every tool echoes its name and arguments as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

LONG = "x" * 70
REF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"person": {"$ref": "#/$defs/Person"}},
    "required": ["person"],
    "$defs": {
        "Person": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        }
    },
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "fs.read": {"type": "object", "properties": {"path": {"type": "string"}}},
    "get weather": {"type": "object", "properties": {"city": {"type": "string"}}},
    LONG: {"type": "object"},
    "with_ref": REF_SCHEMA,
}
# Not valid MCP (the spec requires ``type: object``): listed only with --untyped.
UNTYPED = {
    "empty_schema": {},
    "no_type": {"properties": {"n": {"type": "integer"}}, "required": ["n"]},
}
COLLIDING = {"a.b": {"type": "object"}, "a_b": {"type": "object"}}


def tools(extra: int, flags: list[str]) -> list[dict[str, Any]]:
    schemas = {**SCHEMAS}
    if "--colliding" in flags:
        schemas.update(COLLIDING)
    if "--untyped" in flags:
        schemas.update(UNTYPED)
    out = [{"name": n, "description": f"tool {n}", "inputSchema": s} for n, s in schemas.items()]
    out += [
        {"name": f"bulk_{i}", "description": "bulk", "inputSchema": {"type": "object"}}
        for i in range(extra)
    ]
    return out


def answer(request: dict[str, Any], listed: list[dict[str, Any]]) -> dict[str, Any] | None:
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "odd", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": listed}
    elif method == "tools/call":
        params = request.get("params") or {}
        text = json.dumps({"tool": params.get("name"), "args": params.get("arguments") or {}})
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        return {"jsonrpc": "2.0", "id": rid, "error": error}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def main() -> None:
    counts = [a for a in sys.argv[1:] if a.isdigit()]
    listed = tools(int(counts[0]) if counts else 0, sys.argv[1:])
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), listed)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
