"""An mcp 2.x ``MCPServer`` whose tools sample the client's model with tools and preferences.

Run: ``python tests/mcp_servers/sampling_tools_server.py`` (stdio). Tools:

- ``choose``: one ``sampling/createMessage`` offering a ``get_weather`` tool, with
  ``modelPreferences`` hints; returns the client's answer as JSON (both protocol eras, through
  the SDK's ``Resolve(Sample)``: a mid-call request or an input-required round).
- ``weather_agent``: the SEP tool loop (2025-11-25 era): sample, run the tool the model
  called, send the ``tool_result`` back, sample again; returns the final text as JSON.
"""

from __future__ import annotations

import json
import warnings
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve, Sample
from mcp_types import (
    CreateMessageResultWithTools,
    ModelHint,
    ModelPreferences,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
    ToolResultContent,
    ToolUseContent,
)

server = MCPServer("sampling-tools")
WEATHER = Tool(
    name="get_weather",
    description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
PREFERENCES = ModelPreferences(
    hints=[ModelHint(name="no-such-model"), ModelHint(name="small")], speed_priority=0.9
)


def _ask() -> Sample:
    question = SamplingMessage(role="user", content=TextContent(text="Weather in Oslo?"))
    return Sample(
        [question],
        max_tokens=100,
        tools=[WEATHER],
        tool_choice=ToolChoice(mode="required"),
        model_preferences=PREFERENCES,
    )


def _dump(result: CreateMessageResultWithTools) -> str:
    return json.dumps(
        {
            "model": result.model,
            "stop_reason": result.stop_reason,
            "content": [
                c.model_dump(mode="json", exclude_none=True) for c in result.content_as_list
            ],
        }
    )


@server.tool()
def choose(answer: Annotated[CreateMessageResultWithTools, Resolve(_ask)]) -> str:
    """Ask the client's model, offering a tool; the raw answer as JSON."""
    return _dump(answer)


@server.tool()
async def weather_agent(ctx: Context) -> str:
    """Sample with a tool, answer the tool call, sample again (2025-11-25 era)."""
    session = ctx.request_context.session
    messages = [SamplingMessage(role="user", content=TextContent(text="Weather in Oslo?"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sampling is deprecated in 2026-07-28 only
        first = await session.create_message(
            messages, max_tokens=100, tools=[WEATHER], model_preferences=PREFERENCES
        )
        calls = [c for c in first.content_as_list if isinstance(c, ToolUseContent)]
        messages.append(SamplingMessage(role="assistant", content=first.content_as_list))
        results = [
            ToolResultContent(
                tool_use_id=call.id,
                content=[TextContent(text=f"{call.input.get('city')}: 21 degrees")],
            )
            for call in calls
        ]
        messages.append(SamplingMessage(role="user", content=results))
        second = await session.create_message(messages, max_tokens=100, tools=[WEATHER])
    return json.dumps({"first": json.loads(_dump(first)), "second": json.loads(_dump(second))})


if __name__ == "__main__":
    server.run("stdio")
