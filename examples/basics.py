"""Messages and a scripted model: the smallest agentkit program (no network, no API key)."""

from __future__ import annotations

import anyio

from agentkit import Msg
from agentkit.models import ModelRequest
from agentkit.testing import ScriptedModel, tool_use


async def main() -> None:
    model = ScriptedModel([[tool_use("add", a=1, b=2)], "1 + 2 = 3"], stream=True)
    history = [Msg("user", "What is 1 + 2?", "user")]
    async for chunk in model.request_stream(ModelRequest(history)):  # cumulative chunks
        last = chunk
    call = last.tool_calls[0]
    print(f"model asked for {call['name']}({call['input']})")
    history.append(Msg("assistant", last.content, "assistant"))
    history.append(
        Msg(
            "user",
            [{"type": "tool_result", "id": call["id"], "name": "add", "output": "3"}],
            "user",
        )
    )
    answer = await ScriptedModel(["1 + 2 = 3"]).request(ModelRequest(history))  # one answer
    print("answer:", answer.get_text())
    print("round trip ok:", all(Msg.from_dict(m.to_dict()) == m for m in history))


if __name__ == "__main__":
    anyio.run(main)
