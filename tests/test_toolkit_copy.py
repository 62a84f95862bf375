"""``Toolkit.copy()``: copy-on-write; no change on either side ever shows on the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentkit.testing import tool_use
from agentkit.tools import Toolkit, ToolResponse


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def sub(a: int, b: int) -> int:
    """Subtract."""
    return a - b


def names(tk: Toolkit) -> list[str]:
    return [d.name for d in tk.get_tool_definitions()]


def active_groups(tk: Toolkit) -> list[str]:
    return [g.name for g in tk.groups.values() if g.active]


async def final(tk: Toolkit, name: str, **args: Any) -> ToolResponse:
    return [c async for c in tk.call_tool_function(tool_use(name, **args))][-1]


def template() -> Toolkit:
    tk = Toolkit(max_output_chars=500, default_timeout=3.0)
    tk.register_tool_function(add)
    tk.create_tool_group("web", "Browse the web.")
    tk.register_tool_function(sub, group="web")
    return tk


def snapshot(tk: Toolkit) -> tuple[Any, ...]:
    # Only reads that leave the registry shared (``groups`` would copy it first: a snapshot
    # through it would hide a missing copy-on-write).
    return (
        list(tk.tools.items()),
        repr(tk),  # tool and group names
        names(tk),
        tk.state_dict(),
        tk.meta_tool_name,
    )


MUTATIONS: dict[str, Callable[[Toolkit], Any]] = {
    "register": lambda tk: tk.register_tool_function(add, name="plus"),
    "override": lambda tk: tk.register_tool_function(sub, name="add", namesake="override"),
    "remove": lambda tk: tk.remove_tools(["add"]),
    "create-group": lambda tk: tk.create_tool_group("files", "Read files.", active=True),
    "activate": lambda tk: tk.update_tool_groups(["web"], active=True),
    "remove-group": lambda tk: tk.remove_tool_groups(["web"]),
    "meta-tool": lambda tk: tk.register_meta_tool(),
    "load-state": lambda tk: tk.load_state_dict({"version": 1, "active_groups": ["web"]}),
    "groups-view": lambda tk: setattr(tk.groups["web"], "active", True),
}


@pytest.mark.parametrize("side", ["copy", "original"])
@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_change_on_one_side_never_shows_on_the_other(mutation: str, side: str) -> None:
    original = template()
    names(original)  # fill the active-tools cache before copying
    clone = original.copy()
    assert snapshot(clone) == snapshot(original)
    changed, other = (clone, original) if side == "copy" else (original, clone)
    before = snapshot(other)

    MUTATIONS[mutation](changed)

    assert snapshot(changed) != before
    assert snapshot(other) == before
    assert [(g.name, g.active) for g in other.groups.values()] == [
        ("basic", True),
        ("web", False),
    ]


def test_copy_keeps_settings_and_shares_the_tools() -> None:
    original = template()
    clone = original.copy()
    assert (clone.max_output_chars, clone.default_timeout) == (500, 3.0)
    assert clone.get_tool("add") is original.get_tool("add")
    assert names(clone) == ["add"]


async def test_copies_call_their_tools() -> None:
    clone = template().copy()
    result = await final(clone, "add", a=2, b=3)
    assert result.get_text() == "5"


async def test_meta_tool_of_a_copy_switches_the_copy_only() -> None:
    original = template()
    original.register_meta_tool()
    clone = original.copy()
    assert list(clone.tools) == list(original.tools)
    assert clone.get_tool("reset_equipped_tools") is not original.get_tool("reset_equipped_tools")

    result = await final(clone, "reset_equipped_tools", web=True)
    assert not result.is_error
    assert active_groups(clone) == ["basic", "web"]
    assert active_groups(original) == ["basic"]
    assert "web (equipped)" in clone.get_tool_definitions()[-1].description
    assert "web (not equipped)" in original.get_tool_definitions()[-1].description

    await final(original, "reset_equipped_tools", web=True)
    await final(clone, "reset_equipped_tools", web=False)
    assert active_groups(original) == ["basic", "web"]
    assert active_groups(clone) == ["basic"]


def test_copy_of_a_copy_and_many_copies_stay_independent() -> None:
    original = template()
    copies = [original.copy() for _ in range(3)]
    grandchild = copies[0].copy()
    copies[1].update_tool_groups(["web"], active=True)
    grandchild.remove_tools(["add"])
    assert names(original) == ["add"]
    assert names(copies[0]) == ["add"]
    assert names(copies[1]) == ["add", "sub"]
    assert names(copies[2]) == ["add"]
    assert names(grandchild) == []


def test_subclass_copies_keep_their_class_and_attributes() -> None:
    class Tagged(Toolkit):
        def __init__(self) -> None:
            super().__init__()
            self.tag = "t"

    tk = Tagged()
    tk.register_tool_function(add)
    clone = tk.copy()
    assert type(clone) is Tagged
    assert clone.tag == "t"
    assert names(clone) == ["add"]


def test_annotations_are_the_tools_own_and_travel_into_copies() -> None:
    from agentkit.tools import ToolAnnotations, annotate

    tk = Toolkit()
    tool = tk.register_tool_function(add)
    assert tool.annotations is None
    annotate(tk, "add", title="Add", read_only=True)
    clone = tk.copy()
    copied = clone.get_tool("add")
    assert copied is not None
    assert copied.annotations == ToolAnnotations(title="Add", read_only=True)
    with pytest.raises(KeyError):
        annotate(tk, "missing", read_only=True)


def test_wire_annotations_ignore_hints_that_are_not_booleans() -> None:
    from agentkit.tools import ToolAnnotations

    wire = {"title": "T", "readOnlyHint": "yes", "openWorldHint": False}
    assert ToolAnnotations.from_mcp(wire) == ToolAnnotations(title="T", open_world=False)  # type: ignore[arg-type]
