"""``import agentkit`` / ``agentkit.mcp`` must not load the MCP SDK or HTTP stack."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = """
import sys
import agentkit
import agentkit.mcp
from agentkit.mcp import HttpServer, StdioServer
from agentkit.mcp import MCPClient, MCPTool, register_mcp_client
loaded = [m for m in ("mcp", "mcp_types", "httpx2") if m in sys.modules]
print(",".join(loaded))
"""


def test_mcp_sdk_is_imported_lazily() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"loaded eagerly: {out.stdout.strip()}"


def test_unknown_attribute() -> None:
    import agentkit.mcp

    with pytest.raises(AttributeError, match="NoSuchThing"):
        agentkit.mcp.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
