"""Hand-written reference loops that agentkit is measured against.

* ``sdk_run``: the loop everybody writes first: ``client.chat.completions.create`` with tools,
  run the requested tools, append the assistant message and the tool results, repeat.
* ``httpx_run``: the same loop on bare ``httpx2`` (JSON in, JSON out, SSE parsed by hand):
  the floor of what an HTTP agent loop can cost in Python.

Both execute tool calls of one turn concurrently (``asyncio.gather``; blocking tools through
``asyncio.to_thread``), like the agent does with ``parallel_tool_calls=True``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

Executor = Callable[[str, dict[str, Any]], Awaitable[str]]

SYSTEM = "You are a benchmark agent. Call the tool when asked."
PROMPT = "Run the scenario."


def tool_schema(name: str, description: str = "Benchmark step.") -> dict[str, Any]:
    """The OpenAI function schema of a benchmark tool ``name(i: int) -> str``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"i": {"type": "integer", "description": "Step number."}},
                "required": ["i"],
            },
        },
    }


def first_messages() -> list[dict[str, Any]]:
    """The opening conversation shared by every loop."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]


async def _run_calls(calls: list[dict[str, Any]], execute: Executor) -> list[dict[str, Any]]:
    async def one(call: dict[str, Any]) -> dict[str, Any]:
        fn = call["function"]
        output = await execute(fn["name"], json.loads(fn["arguments"] or "{}"))
        return {"role": "tool", "tool_call_id": call["id"], "content": output}

    if len(calls) == 1:
        return [await one(calls[0])]
    return list(await asyncio.gather(*(one(c) for c in calls)))


def _merge_tool_delta(calls: dict[int, dict[str, Any]], delta_calls: Any) -> None:
    for tc in delta_calls:
        entry = calls.setdefault(
            tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if tc.id:
            entry["id"] = tc.id
        fn = tc.function
        if fn is not None:
            if fn.name:
                entry["function"]["name"] = fn.name
            if fn.arguments:
                entry["function"]["arguments"] += fn.arguments


async def _sdk_turn_stream(
    client: Any, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    stream = await client.chat.completions.create(
        model=model,
        messages=messages,
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
        if delta.tool_calls:
            _merge_tool_delta(calls, delta.tool_calls)
    return "".join(text), [calls[i] for i in sorted(calls)]


async def _sdk_turn(
    client: Any, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    response = await client.chat.completions.create(model=model, messages=messages, tools=tools)
    message = response.choices[0].message
    calls = [
        {
            "id": tc.id,
            "type": "function",
            "function": {"name": tc.function.name, "arguments": tc.function.arguments},
        }
        for tc in message.tool_calls or ()
    ]
    return message.content or "", calls


async def sdk_run(
    client: Any,
    model: str,
    tools: list[dict[str, Any]],
    execute: Executor,
    *,
    stream: bool,
    max_turns: int = 100,
) -> str:
    """Run one conversation with the raw ``openai`` SDK; return the final answer."""
    messages = first_messages()
    turn = _sdk_turn_stream if stream else _sdk_turn
    for _ in range(max_turns):
        text, calls = await turn(client, model, messages, tools)
        if not calls:
            return text
        messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        messages.extend(await _run_calls(calls, execute))
    raise RuntimeError("too many turns")


async def _httpx_turn_stream(
    client: Any, url: str, payload: dict[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    payload = {**payload, "stream": True, "stream_options": {"include_usage": True}}
    async with client.stream("POST", url, json=payload) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if not chunk["choices"]:
                continue
            delta = chunk["choices"][0]["delta"]
            if delta.get("content"):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or ():
                entry = calls.setdefault(
                    tc["index"],
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] = tc.get("id") or entry["id"]
                fn = tc.get("function") or {}
                entry["function"]["name"] = fn.get("name") or entry["function"]["name"]
                entry["function"]["arguments"] += fn.get("arguments") or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


async def _httpx_turn(
    client: Any, url: str, payload: dict[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    response = await client.post(url, json=payload)
    response.raise_for_status()
    message = response.json()["choices"][0]["message"]
    return message.get("content") or "", message.get("tool_calls") or []


async def httpx_run(
    client: Any,
    base_url: str,
    model: str,
    tools: list[dict[str, Any]],
    execute: Executor,
    *,
    stream: bool,
    max_turns: int = 100,
) -> str:
    """Run one conversation on bare ``httpx2``; return the final answer."""
    url = base_url + "/chat/completions"
    messages = first_messages()
    for _ in range(max_turns):
        payload = {"model": model, "messages": messages, "tools": tools}
        if stream:
            text, calls = await _httpx_turn_stream(client, url, payload)
        else:
            text, calls = await _httpx_turn(client, url, payload)
        if not calls:
            return text
        messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        messages.extend(await _run_calls(calls, execute))
    raise RuntimeError("too many turns")


async def anthropic_sdk_run(
    client: Any,
    model: str,
    tools: list[dict[str, Any]],
    execute: Executor,
    *,
    stream: bool,
    max_turns: int = 100,
) -> str:
    """Run one conversation with the raw ``anthropic`` SDK (Messages API); return the answer."""
    a_tools = [
        {"name": t["function"]["name"], "description": t["function"]["description"],
         "input_schema": t["function"]["parameters"]}
        for t in tools
    ]  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    for _ in range(max_turns):
        request = {"model": model, "max_tokens": 1024, "system": SYSTEM, "messages": messages}
        if stream:
            async with client.messages.stream(**request, tools=a_tools) as events:
                message = await events.get_final_message()
        else:
            message = await client.messages.create(**request, tools=a_tools)
        blocks = [b.model_dump(exclude_none=True) for b in message.content]
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if not calls:
            return "".join(b["text"] for b in blocks if b["type"] == "text")
        messages.append({"role": "assistant", "content": blocks})

        async def one(call: dict[str, Any]) -> dict[str, Any]:
            output = await execute(call["name"], call["input"])
            return {"type": "tool_result", "tool_use_id": call["id"], "content": output}

        results = await asyncio.gather(*(one(c) for c in calls))
        messages.append({"role": "user", "content": list(results)})
    raise RuntimeError("too many turns")
