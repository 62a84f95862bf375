"""One model request from the benchmarks' OpenAI tool schemas (the adapter without the agent)."""

from __future__ import annotations

from typing import Any

from benchmarks.common import require


def model_request(messages: list[Any], tools: list[dict[str, Any]]) -> Any:
    """The ``ModelRequest`` of ``messages`` offering ``tools`` (``tool_schema`` dicts)."""
    request_cls, definition_cls = require("agentkit.models", "ModelRequest", "ToolDefinition")
    definitions = [
        definition_cls(
            t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"]
        )
        for t in tools
    ]
    return request_cls(list(messages), definitions)


async def ask(model: Any, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
    """The whole answer, streamed when the model streams (the last chunk is complete)."""
    request = model_request(messages, tools)
    if not model.stream:
        return await model.request(request)
    final = None
    async for chunk in model.request_stream(request):
        final = chunk
    return final
