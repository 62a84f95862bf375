"""The Toolkit keeps presets out of the model's reach and turns odd return values into text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentkit.exceptions import ToolRegistrationError
from agentkit.testing import tool_use
from agentkit.tools import ToolContext, Toolkit, ToolResponse


async def final_of(tk: Toolkit, name: str, **arguments: Any) -> ToolResponse:
    chunks = [c async for c in tk.call_tool_function(tool_use(name, "call-1", **arguments))]
    assert chunks[-1].is_last
    return chunks[-1]


async def test_model_cannot_override_a_preset_through_var_keyword() -> None:
    tk = Toolkit()

    def query(**kwargs: Any) -> str:
        """Run a query with the given options."""
        return json.dumps(kwargs, sort_keys=True)

    tk.register_tool_function(query, preset_kwargs={"api_key": "secret"})
    assert "api_key" not in json.dumps([d.to_openai() for d in tk.get_tool_definitions()])
    ok = await final_of(tk, "query", limit=3)
    assert not ok.is_error
    assert json.loads(ok.content[0]["text"]) == {"api_key": "secret", "limit": 3}  # type: ignore[typeddict-item]
    bad = await final_of(tk, "query", api_key="stolen", limit=3)
    assert bad.is_error
    assert bad.metadata["error"] == "invalid_arguments"
    assert "['api_key'] are fixed by the application" in bad.content[0]["text"]  # type: ignore[typeddict-item]


async def test_model_cannot_set_a_preset_of_a_named_parameter() -> None:
    tk = Toolkit()

    def read(path: str, root: str) -> str:
        """Read a file.

        Args:
            path: Relative path.
            root: Root directory.
        """
        return f"{root}/{path}"

    tk.register_tool_function(read, preset_kwargs={"root": "/srv"})
    bad = await final_of(tk, "read", path="a", root="/etc")
    assert bad.is_error and "root" in bad.content[0]["text"]  # type: ignore[typeddict-item]
    assert (await final_of(tk, "read", path="a")).content[0]["text"] == "/srv/a"  # type: ignore[typeddict-item]


def test_presetting_the_tool_context_parameter_is_refused() -> None:
    tk = Toolkit()

    def f(a: int, ctx: ToolContext) -> str:
        """F.

        Args:
            a: A.
        """
        return str(a)

    with pytest.raises(ToolRegistrationError, match="ToolContext parameter 'ctx' cannot be preset"):
        tk.register_tool_function(f, preset_kwargs={"ctx": 5})
    assert tk.get_tool("f") is None


async def test_odd_return_values_become_text_results() -> None:
    tk = Toolkit()

    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque>"

    def opaque() -> object:
        """Returns an object that is not JSON."""
        return Opaque()

    def cyclic() -> dict[str, Any]:
        """Returns a self-referencing dict."""
        d: dict[str, Any] = {}
        d["self"] = d
        return d

    async def nothing():  # type: ignore[no-untyped-def]
        """An async generator that yields nothing."""
        if False:
            yield "never"

    for fn in (opaque, cyclic, nothing):
        tk.register_tool_function(fn)
    assert (await final_of(tk, "opaque")).content[0]["text"] == "<Opaque>"  # type: ignore[typeddict-item]
    cyc = await final_of(tk, "cyclic")
    assert not cyc.is_error and "self" in cyc.content[0]["text"]  # type: ignore[typeddict-item]
    empty = await final_of(tk, "nothing")
    assert not empty.is_error and empty.content[0]["text"]  # type: ignore[typeddict-item]
