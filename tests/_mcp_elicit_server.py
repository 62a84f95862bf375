"""A served Toolkit whose tools ask the client's user (``MCPContext.elicit``), a test peer.

Run as a script: ``python tests/_mcp_elicit_server.py [stdio|streamable_http PORT]``.
"""

from __future__ import annotations

import sys

import anyio

from agentkit.mcp._context import MCPContext
from agentkit.tools import ToolContext, Toolkit

SEATS = {"type": "object", "properties": {"seats": {"type": "integer", "default": 1}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def build() -> Toolkit:
    tk = Toolkit()

    @tk.tool
    async def book(city: str, ctx: ToolContext) -> str:
        """Book a trip after asking the user how many seats.

        Args:
            city: Where to.
        """
        mcp = MCPContext.of(ctx)
        assert mcp is not None
        answer = await mcp.elicit(f"How many seats to {city}?", SEATS)
        if answer["action"] != "accept":
            return f"not booked ({answer['action']}) at {mcp.protocol_version}"
        content = answer["content"]
        assert isinstance(content, dict)
        return f"booked {content['seats']} to {city} at {mcp.protocol_version}"

    @tk.tool
    async def survey(ctx: ToolContext) -> str:
        """Ask two questions in a row."""
        mcp = MCPContext.of(ctx)
        assert mcp is not None
        first = await mcp.elicit("Your name?", NAME)
        second = await mcp.elicit("Seats?", SEATS)
        return f"{first['content']} then {second['content']}"

    return tk


if __name__ == "__main__":
    from agentkit.mcp import serve

    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    anyio.run(lambda: serve(build(), transport, port=port, name="elicit"))  # type: ignore[arg-type]
