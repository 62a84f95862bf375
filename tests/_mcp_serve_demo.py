"""A Toolkit with one tool of each kind, served by ``agentkit.mcp.serve`` (test peer).

Run as a script: ``python tests/_mcp_serve_demo.py [stdio|streamable_http PORT]``.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Literal

import anyio

from agentkit.messages import ImageBlock, TextBlock
from agentkit.tools import ToolContext, Toolkit, ToolResponse

PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


class Mood(Enum):
    HAPPY = "happy"
    GRUMPY = "grumpy"


def build() -> Toolkit:
    tk = Toolkit()

    @tk.tool
    async def add(a: int, b: int = 2) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    @tk.tool
    def shout(text: str, times: Literal[1, 2, 3] = 1, mood: Mood = Mood.HAPPY) -> str:
        """Repeat a text in upper case.

        Args:
            text: What to shout.
            times: How often.
            mood: How it sounds.
        """
        return " ".join([text.upper()] * times) + ("!" if mood is Mood.HAPPY else "...")

    @tk.tool
    async def count(n: int, ctx: ToolContext) -> str:
        """Count to n, reporting progress.

        Args:
            n: Where to stop.
        """
        for i in range(1, n + 1):
            await ctx.report_progress(f"at {i}", progress=i, total=n)
        return f"counted to {n}"

    @tk.tool
    def fail(message: str) -> str:
        """Always fail.

        Args:
            message: The error message.
        """
        raise RuntimeError(message)

    @tk.tool
    def pixel() -> ToolResponse:
        """Return a one-pixel image with a caption."""
        image = ImageBlock(
            type="image", source={"type": "base64", "media_type": "image/png", "data": PIXEL_PNG}
        )
        return ToolResponse(content=[TextBlock(type="text", text="a pixel"), image])

    @tk.tool
    async def wait_forever(marker: str) -> str:
        """Sleep until cancelled, leaving marker files behind.

        Args:
            marker: Path of the marker file.
        """
        path = Path(marker)
        path.write_text("started")
        try:
            await anyio.sleep(3600)
        finally:
            path.write_text("cancelled")
        return "never"

    tk.create_tool_group("extra", "Extra tools", active=False)

    @tk.tool(group="extra")
    def hidden() -> str:
        """Not listed while its group is inactive."""
        return "hidden"

    return tk


if __name__ == "__main__":
    from agentkit.mcp import serve

    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    anyio.run(lambda: serve(build(), transport, port=port, name="demo"))  # type: ignore[arg-type]
