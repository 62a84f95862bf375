"""OpenAI Responses API answers of the mock server (``POST /v1/responses``).

Same stateless scenarios as the other wire formats (see ``mock_server.plan_turn``): the turn is
decided by counting the ``function_call_output`` items of the request's ``input``. Answers carry
a reasoning item with encrypted content, as a reasoning model's do, so that a client which does
not replay reasoning is measured doing the same work as one that does.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "responses_first_tool",
    "responses_object",
    "responses_stream",
    "responses_tool_results",
]


def responses_tool_results(body: dict[str, Any]) -> int:
    """How many tool results the request's ``input`` holds."""
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")


def responses_first_tool(body: dict[str, Any]) -> str:
    """The name of the first function tool offered (``"step"`` when none is)."""
    for tool in body.get("tools") or ():
        if tool.get("type") == "function":
            return str(tool["name"])
    return "step"


def _items(plan: Any, turn: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {
            "id": f"rs_{turn}",
            "type": "reasoning",
            "summary": [],
            "encrypted_content": f"ENC{turn:04d}" * 8,
        }
    ]
    if plan.text:
        part = {"type": "output_text", "text": plan.text, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": f"msg_{turn}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    for cid, name, args in plan.calls:
        items.append(
            {
                "id": f"fc_{cid}",
                "type": "function_call",
                "status": "completed",
                "call_id": cid,
                "name": name,
                "arguments": json.dumps(args),
            }
        )
    return items


def _response(body: dict[str, Any], output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    prompt = 10 * len(body.get("input") or ())
    return {
        "id": "resp_mock",
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": body.get("model", ""),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": prompt + 5,
        },
    }


def responses_object(body: dict[str, Any], plan: Any) -> bytes:
    """A non-streaming ``response`` object for ``plan``."""
    turn = responses_tool_results(body)
    return json.dumps(_response(body, _items(plan, turn), "completed")).encode()


def _pieces(text: str, parts: int) -> list[str]:
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


def _item_events(index: int, item: dict[str, Any], plan: Any) -> list[dict[str, Any]]:
    base = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "message":
        start: dict[str, Any] = {**item, "status": "in_progress", "content": []}
        text = item["content"][0]["text"]
        deltas = [
            {"type": "response.output_text.delta", **base, "content_index": 0, "delta": p}
            for p in _pieces(text, plan.text_pieces)
        ]
    elif kind == "function_call":
        start = {**item, "status": "in_progress", "arguments": ""}
        deltas = [
            {"type": "response.function_call_arguments.delta", **base, "delta": p}
            for p in _pieces(item["arguments"], plan.arg_pieces)
        ]
    else:
        start, deltas = {"id": item["id"], "type": kind, "summary": []}, []
    return [
        {"type": "response.output_item.added", "output_index": index, "item": start},
        *deltas,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def responses_stream(body: dict[str, Any], plan: Any) -> bytes:
    """The whole SSE body of a finished streamed response for ``plan``."""
    output = _items(plan, responses_tool_results(body))
    final = _response(body, output, "completed")
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
    for index, item in enumerate(output):
        events += _item_events(index, item, plan)
    events.append({"type": "response.completed", "response": final})
    return b"".join(
        b"event: %s\ndata: %s\n\n"
        % (e["type"].encode(), json.dumps({**e, "sequence_number": n}).encode())
        for n, e in enumerate(events)
    )
