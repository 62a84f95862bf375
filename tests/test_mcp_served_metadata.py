"""What a served MCPApp says about itself: version, icons, website, tool icons, unknown URIs."""

from __future__ import annotations

import pytest
from mcp import Client, MCPError

from agentkit.mcp import MCPApp
from agentkit.tools import Toolkit

ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}


def _app() -> MCPApp:
    tk = Toolkit()

    @tk.tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    app = MCPApp(
        tk,
        name="glossary",
        version="1.4.2",
        icons=[ICON],
        website_url="https://example.com/glossary",
        tool_icons={"lookup": [ICON]},
    )

    @app.resource("glossary://terms", mime_type="text/plain")
    def terms() -> str:
        """All terms."""
        return "mcp"

    return app


async def test_the_server_reports_its_own_version_icons_and_website() -> None:
    async with Client(_app().build_server(), mode="legacy") as client:
        info = client.server_info
        tools = (await client.list_tools()).tools
    assert info is not None
    assert (info.name, info.version) == ("glossary", "1.4.2")  # not agentkit's version
    assert info.website_url == "https://example.com/glossary"
    assert [
        i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in info.icons or []
    ] == [ICON]
    (tool,) = tools
    assert [
        i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in tool.icons or []
    ] == [ICON]


async def test_an_app_without_a_version_does_not_claim_agentkits() -> None:
    from agentkit._version import __version__

    async with Client(MCPApp(Toolkit()).build_server(), mode="legacy") as client:
        assert client.server_info is not None
        assert client.server_info.version == "0.0.0" != __version__


async def test_an_unknown_resource_is_invalid_params_naming_the_uri() -> None:
    async with Client(_app().build_server(), mode="legacy") as client:
        with pytest.raises(MCPError) as info:
            await client.read_resource("glossary://nope")
    assert info.value.code == -32602
    assert info.value.data == {"uri": "glossary://nope"}
