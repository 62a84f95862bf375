"""Structured output: the final answer validated against a pydantic model.

``await agent.run(msg, output_type=TripPlan)`` offers the model an extra
``generate_response`` tool whose schema is ``TripPlan``'s JSON schema. The agent may use its
other tools first; its final answer must be a valid ``TripPlan``. An invalid attempt is
answered with the validation error, and the model corrects itself (up to 3 retries). The
validated value (JSON form) is in ``reply.metadata["structured_output"]``.

Offline, a small ``FunctionModel`` plays the model: it checks the weather, then answers
once with a wrong type (``days="three"``) and corrects itself after the error. Set
OPENAI_API_KEY / ANTHROPIC_API_KEY / AGENTKIT_MODEL to use a real one.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel, Field

from agentkit.agent import ReActAgent
from agentkit.cli import describe_model, model_from_env
from agentkit.messages import Msg
from agentkit.testing import FunctionModel, RequestInfo, ScriptItem, tool_use
from agentkit.tools import Toolkit


class TripPlan(BaseModel):
    """A short trip plan."""

    city: str
    days: int = Field(gt=0, le=14)
    sights: list[str] = Field(min_length=1, max_length=5)
    pack_umbrella: bool


async def get_weather(city: str) -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city name.
    """
    return f"{city}: light rain all week, 17 °C"


def scripted(messages: list[Msg], info: RequestInfo) -> ScriptItem:
    """Offline stand-in for the model: weather first, one invalid answer, then a valid one."""
    results = [b for m in messages for b in m.get_blocks("tool_result")]
    if not results:
        return [tool_use("get_weather", city="Tokyo")]
    last = results[-1]
    plan: dict[str, Any] = {
        "city": "Tokyo",
        "days": 3,
        "sights": ["Senso-ji", "Meiji Jingu", "teamLab Planets"],
        "pack_umbrella": "rain" in str(results[0]["output"]),
    }
    if last["name"] == "get_weather":
        return [tool_use("generate_response", **{**plan, "days": "three"})]  # a mistake
    return [tool_use("generate_response", **plan)]  # corrected after the error


async def main() -> None:
    model = model_from_env() or FunctionModel(scripted, model_name="structured-demo")
    print(f"model: {describe_model(model)}")
    toolkit = Toolkit()
    toolkit.register_tool_function(get_weather)
    agent = ReActAgent(
        "planner",
        "You plan short trips. Check the weather first.",
        model,
        toolkit,
        print_hint=False,
    )
    result = await agent.run("Plan 3 days in Tokyo.", output_type=TripPlan)
    plan: TripPlan = result.output  # validated; no re-validation by hand
    print(f"plan: {plan!r}")
    for msg in result.new_messages:
        for block in msg.get_blocks("tool_result"):
            status = "error" if block.get("is_error") else "ok"
            print(f"  {block['name']} [{status}]: {str(block['output']).splitlines()[0][:80]}")
    print(f"requests: {result.usage.requests}, stop: {result.stop_reason}")


if __name__ == "__main__":
    anyio.run(main)
