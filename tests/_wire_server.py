"""A local HTTP/1.1 server speaking the OpenAI Chat Completions, OpenAI Responses and Anthropic
Messages wire formats.

Real SDK clients are pointed at it through ``base_url``; each test scripts the answers, in
order, and inspects the requests the server received. Built on plain ``asyncio`` streams so a
test controls the socket exactly: abrupt cuts, streams that never end, and detecting that the
client closed its connection.

Usage::

    async with WireServer() as server:
        server.script(Reply(json=openai_completion(text="hi")))
        model = OpenAIChatModel("gpt", api_key="k", base_url=server.openai_url, stream=False)
        ...
        assert server.requests[0].json["model"] == "gpt"

Script items (consumed one per request):

- ``Reply(status=200, json=..., body=b"", headers={})``: a plain response.
- ``Stream(events=[...], then="end"|"cut"|"hang", delay=0.0)``: an SSE response sent as chunked
  transfer encoding. ``"cut"`` aborts the TCP connection after the events (a stream cut
  mid-way), ``"hang"`` keeps it open until the client goes away (``stream.closed`` is then set).
- a callable ``fn(request) -> item`` computing the answer from the recorded request.

When the script runs out the server answers 500 with an explanatory error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "RecordedRequest",
    "Reply",
    "Stream",
    "WireServer",
    "anthropic_error",
    "anthropic_message",
    "anthropic_stream",
    "aws_event_frame",
    "bedrock_stream",
    "openai_chunks",
    "openai_completion",
    "openai_error",
    "responses_body",
    "responses_call",
    "responses_message",
    "responses_reasoning",
    "responses_stream",
    "sse",
]


@dataclass
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    """A plain (non-streaming) HTTP response."""

    status: int = 200
    json: Any = None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stream:
    """A server-sent-events response.

    Attributes:
        events: Raw SSE event bytes (see :func:`sse`), sent one chunk each.
        then: What happens after the events: a clean end, an abrupt cut, or hanging open.
        delay: Seconds to wait between events.
        closed: Set when the client closed the connection while the stream was hanging.
        closed_at: ``time.perf_counter()`` when that happened.
    """

    events: Sequence[bytes]
    then: Literal["end", "cut", "hang"] = "end"
    delay: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    closed_at: float | None = None
    sent: int = 0


ScriptItem = Reply | Stream | Callable[[RecordedRequest], "Reply | Stream"]


def sse(data: Any, event: str | None = None) -> bytes:
    """Encode one SSE event (``data`` is JSON-encoded unless it is already a string)."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class WireServer:
    """The scripted server; use as ``async with WireServer() as server``."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: deque[ScriptItem] = deque()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.connections = 0

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> WireServer:
        self._server = await asyncio.start_server(self._on_connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            for task in list(self._tasks):
                with contextlib.suppress(BaseException):
                    await task
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> WireServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """Base URL for ``openai.AsyncOpenAI`` (paths below ``/v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        """Base URL for ``anthropic.AsyncAnthropic`` (it adds ``/v1/...`` itself)."""
        return self.url

    def script(self, *items: ScriptItem) -> None:
        """Queue answers, one per future request."""
        self._script.extend(items)

    @property
    def remaining(self) -> int:
        return len(self._script)

    # -- HTTP --------------------------------------------------------------------------
    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                self.requests.append(request)
                item: Any = self._script.popleft() if self._script else _exhausted(request)
                if callable(item):
                    item = item(request)
                if isinstance(item, Reply):
                    writer.write(_encode_reply(item))
                    await writer.drain()
                    continue
                if not await self._stream(item, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _stream(
        self, item: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Send an SSE response; return whether the connection can be reused."""
        headers = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
        writer.write(_head(item.status, {**headers, **item.headers}))
        for i, event in enumerate(item.events):
            if i and item.delay:
                await asyncio.sleep(item.delay)
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            item.sent += 1
        if item.then == "cut":
            await asyncio.sleep(0.01)  # let the client read what was sent before the cut
            writer.transport.abort()
            return False
        if item.then == "hang":
            # The client must close the connection; reading EOF tells us it did.
            with contextlib.suppress(ConnectionError):
                while await reader.read(1024):
                    pass
            item.closed_at = time.perf_counter()
            item.closed.set()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _exhausted(request: RecordedRequest) -> Reply:
    message = f"wire server script exhausted at request {request.method} {request.path}"
    return Reply(500, json={"error": {"message": message, "type": "script_exhausted"}})


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return RecordedRequest(method, path, headers, body)


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _encode_reply(reply: Reply) -> bytes:
    body = json.dumps(reply.json).encode() if reply.json is not None else reply.body
    headers = {"content-type": "application/json", "content-length": str(len(body))}
    return _head(reply.status, {**headers, **reply.headers}) + body


# -- OpenAI Chat Completions ---------------------------------------------------------------
ToolCallSpec = tuple[str, str, str]  # (id, name, arguments JSON text)


def openai_completion(
    text: str | None = None,
    tool_calls: Sequence[ToolCallSpec] = (),
    *,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    id: str = "chatcmpl-1",
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in tool_calls
        ]
    reason = finish_reason or ("tool_calls" if tool_calls else "stop")
    return {
        "id": id,
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        },
    }


def _pieces(value: str, parts: int) -> list[str]:
    step = max(1, -(-len(value) // max(1, parts)))
    return [value[i : i + step] for i in range(0, len(value), step)] or [""]


def openai_chunks(
    text: str | None = None,
    tool_calls: Sequence[ToolCallSpec] = (),
    *,
    reasoning: str | None = None,
    parts: int = 3,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    id: str = "chatcmpl-1",
    done: bool = True,
    interleave: bool = False,
) -> list[bytes]:
    """SSE events of a streamed completion, every value split into ``parts`` deltas.

    With ``interleave`` the argument pieces of parallel tool calls alternate between calls
    (as some servers send them) instead of arriving call after call.
    """

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        base = {"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return sse({**base, "choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": p}) for p in _pieces(reasoning or "", parts) if p]
    events += [chunk({"content": p}) for p in _pieces(text or "", parts) if p]
    heads = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": n,
                        "id": i,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        for n, (i, name, _) in enumerate(tool_calls)
    ]
    bodies = [
        [
            chunk({"tool_calls": [{"index": n, "function": {"arguments": p}}]})
            for p in _pieces(a, parts)
        ]
        for n, (_, _, a) in enumerate(tool_calls)
    ]
    if interleave:
        events += heads
        for row in range(max((len(b) for b in bodies), default=0)):
            events += [b[row] for b in bodies if row < len(b)]
    else:
        for head, body in zip(heads, bodies, strict=True):
            events += [head, *body]
    events.append(chunk({}, finish_reason or ("tool_calls" if tool_calls else "stop")))
    if usage is not None:
        events.append(
            sse(
                {
                    "id": id,
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [],
                    "usage": {
                        "prompt_tokens": usage[0],
                        "completion_tokens": usage[1],
                        "total_tokens": sum(usage),
                    },
                }
            )
        )
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


def openai_error(status: int, message: str, code: str | None = None, **headers: str) -> Reply:
    """An OpenAI-style error response."""
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    return Reply(
        status, json={"error": error}, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )


# -- Anthropic Messages --------------------------------------------------------------------
def anthropic_message(
    content: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    id: str = "msg_1",
) -> dict[str, Any]:
    """A non-streaming ``message`` body; ``content`` holds Anthropic content blocks."""
    has_tool = any(b["type"] == "tool_use" for b in content)
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": list(content),
        "stop_reason": stop_reason or ("tool_use" if has_tool else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _block_events(index: int, block: dict[str, Any], parts: int) -> list[bytes]:
    kind = block["type"]
    events: list[bytes] = []
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], parts)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"], parts)
        ]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "sig")})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = block.get("raw", json.dumps(block.get("input", {})) if block.get("input") else "")
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, parts) if p]
    else:  # redacted_thinking and anything else arrive whole
        start, deltas = dict(block), []
    events.append(
        sse(
            {"type": "content_block_start", "index": index, "content_block": start},
            "content_block_start",
        )
    )
    for delta in deltas:
        events.append(
            sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
        )
    events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    return events


def anthropic_stream(
    content: Sequence[dict[str, Any]],
    *,
    parts: int = 3,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    id: str = "msg_1",
    stop: bool = True,
) -> list[bytes]:
    """SSE events of a streamed message; a tool_use block may give ``raw`` (argument text)."""
    message = anthropic_message([], usage=(usage[0], 1), id=id)
    message["stop_reason"] = None
    events = [sse({"type": "message_start", "message": message}, "message_start")]
    events.append(sse({"type": "ping"}, "ping"))
    for index, block in enumerate(content):
        events += _block_events(index, block, parts)
    has_tool = any(b["type"] == "tool_use" for b in content)
    delta = {
        "stop_reason": stop_reason or ("tool_use" if has_tool else "end_turn"),
        "stop_sequence": None,
    }
    events.append(
        sse(
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage[1]}},
            "message_delta",
        )
    )
    if stop:
        events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def anthropic_error(
    status: int, message: str, kind: str = "invalid_request_error", **headers: str
) -> Reply:
    """An Anthropic-style error response."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, json=body, headers={k.replace("_", "-"): v for k, v in headers.items()})


# -- OpenAI Responses (POST /v1/responses) -------------------------------------------------
def responses_message(text: str, *, id: str = "msg_1", phase: str | None = None) -> dict[str, Any]:
    """An assistant ``message`` output item with one ``output_text`` part."""
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    item: dict[str, Any] = {
        "id": id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    if phase is not None:
        item["phase"] = phase
    return item


def responses_call(
    call_id: str, name: str, arguments: str, *, id: str | None = None
) -> dict[str, Any]:
    """A ``function_call`` output item."""
    return {
        "id": id or f"fc_{call_id}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def responses_reasoning(
    id: str, summary: Sequence[str] = (), encrypted: str | None = None
) -> dict[str, Any]:
    """A ``reasoning`` output item (``encrypted``: its ``encrypted_content``)."""
    item: dict[str, Any] = {
        "id": id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": s} for s in summary],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def responses_body(
    output: Sequence[dict[str, Any]],
    *,
    usage: tuple[int, int] = (10, 5),
    cached: int = 0,
    reasoning_tokens: int = 0,
    id: str = "resp_1",
    status: str = "completed",
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``response`` object as ``POST /v1/responses`` returns it (non-streaming)."""
    return {
        "id": id,
        "object": "response",
        "created_at": 1,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": "m",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": sum(usage),
        },
    }


def _responses_item_events(index: int, item: dict[str, Any], parts: int) -> list[dict[str, Any]]:
    kind = item["type"]
    events: list[dict[str, Any]] = []
    base = {"item_id": item["id"], "output_index": index}
    if kind == "message":
        start = {**item, "status": "in_progress", "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": start})
        for n, part in enumerate(item["content"]):
            empty = {**part, "text": ""}
            events.append(
                {"type": "response.content_part.added", **base, "content_index": n, "part": empty}
            )
            events += [
                {"type": "response.output_text.delta", **base, "content_index": n, "delta": p}
                for p in _pieces(part["text"], parts)
                if p
            ]
            events.append(
                {
                    "type": "response.output_text.done",
                    **base,
                    "content_index": n,
                    "text": part["text"],
                }
            )
    elif kind == "function_call":
        start = {**item, "status": "in_progress", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": index, "item": start})
        events += [
            {"type": "response.function_call_arguments.delta", **base, "delta": p}
            for p in _pieces(item["arguments"], parts)
            if p
        ]
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **base,
                "arguments": item["arguments"],
            }
        )
    elif kind == "reasoning":
        # As OpenAI streams it: the added item has no (complete) encrypted content yet.
        start = {"id": item["id"], "type": "reasoning", "summary": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": start})
        for n, part in enumerate(item["summary"]):
            empty = {"type": "summary_text", "text": ""}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **base,
                    "summary_index": n,
                    "part": empty,
                }
            )
            events += [
                {
                    "type": "response.reasoning_summary_text.delta",
                    **base,
                    "summary_index": n,
                    "delta": p,
                }
                for p in _pieces(part["text"], parts)
                if p
            ]
    else:
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def responses_stream(
    output: Sequence[dict[str, Any]],
    *,
    parts: int = 3,
    usage: tuple[int, int] = (10, 5),
    cached: int = 0,
    reasoning_tokens: int = 0,
    id: str = "resp_1",
    complete: bool = True,
    final: Literal["completed", "incomplete", "failed"] = "completed",
    error: dict[str, Any] | None = None,
) -> list[bytes]:
    """SSE events of a streamed response, every value split into ``parts`` deltas.

    ``complete=False`` leaves out the final ``response.completed`` event (a stream cut short).
    """
    body = responses_body(
        output,
        usage=usage,
        cached=cached,
        reasoning_tokens=reasoning_tokens,
        id=id,
        status=final,
        error=error,
        incomplete="max_output_tokens" if final == "incomplete" else None,
    )
    created = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.in_progress", "response": created},
    ]
    for index, item in enumerate(output):
        events += _responses_item_events(index, item, parts)
    if complete:
        events.append({"type": f"response.{final}", "response": body})
    return [sse({**event, "sequence_number": n}, event["type"]) for n, event in enumerate(events)]


# -- AWS Bedrock (InvokeModelWithResponseStream) ------------------------------------------
def _aws_header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        bytes([len(raw_name)]) + raw_name + b"\x07" + len(raw_value).to_bytes(2, "big") + raw_value
    )


def aws_event_frame(payload: bytes, headers: dict[str, str]) -> bytes:
    """One AWS event-stream message (the binary framing of Bedrock streams)."""
    import zlib

    head = b"".join(_aws_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(head).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    message = prelude + head + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def bedrock_stream(events: Sequence[bytes]) -> list[bytes]:
    """Anthropic SSE events (as :func:`anthropic_stream` makes them) as Bedrock chunk frames."""
    import base64

    frames = []
    for event in events:
        data = event.split(b"data: ", 1)[1].strip()
        payload = json.dumps({"bytes": base64.b64encode(data).decode(), "p": "abcd"}).encode()
        headers = {
            ":event-type": "chunk",
            ":content-type": "application/json",
            ":message-type": "event",
        }
        frames.append(aws_event_frame(payload, headers))
    return frames
