"""A tool's ``tool_definition`` is one object while what it describes is unchanged (#34)."""

from __future__ import annotations

from agentkit import Toolkit


def test_the_definition_is_reused_until_name_description_or_schema_change() -> None:
    toolkit = Toolkit()

    @toolkit.tool
    def step(i: int) -> str:
        """One step.

        Args:
            i: Step number.
        """
        return str(i)

    tool = toolkit.tools["step"]
    first = toolkit.get_tool_definitions()[0]
    assert toolkit.get_tool_definitions()[0] is first  # no new object per request
    tool.description = "Another step."
    changed = tool.tool_definition
    assert changed is not first and changed.description == "Another step."
    tool.name = "renamed"
    assert tool.tool_definition.name == "renamed"
    tool.parameters = {"type": "object", "properties": {}}
    assert tool.tool_definition.parameters == {"type": "object", "properties": {}}
    assert tool.tool_definition is tool.tool_definition
