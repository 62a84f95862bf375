"""A small stdio MCP server for the cold-server tests.

Run: ``python cold_server.py STATE_DIR``. On start it appends its pid to
``STATE_DIR/starts`` (so a test sees whether and how often it was started) and reads the
description of its ``lookup`` tool from ``STATE_DIR/description`` (default below), so a test
can change a tool's definition while the server is not running, as an update would.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

STATE = Path(sys.argv[1])
with (STATE / "starts").open("a") as starts:
    starts.write(f"{os.getpid()}\n")
described = STATE / "description"
DESCRIPTION = described.read_text() if described.exists() else "Look a word up in the glossary."

server = MCPServer("cold-test")


@server.tool(description=DESCRIPTION)
def lookup(word: str) -> str:
    return f"{word}: a word"


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


if __name__ == "__main__":
    server.run("stdio")
