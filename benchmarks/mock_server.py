"""A fast local mock LLM server: OpenAI Chat Completions and Anthropic Messages on 127.0.0.1.

It is a minimal HTTP/1.1 server written on ``asyncio.Protocol`` (keep-alive, Content-Length
bodies, chunked transfer only for endless streams) so that it costs a few tens of microseconds
per request and is never the bottleneck of a benchmark. It is *stateless*: every answer is
decided from the messages in the request, by counting the tool results it contains.

Scenarios are selected by the model name:

``steps-N``
    One tool call per turn until the conversation holds N tool results, then a text answer.
``parallel-N``
    N tool calls in the first turn, then (once results are in) a text answer.
``text-N``
    A long answer: N words, streamed one per chunk, ending with the usual sentence.
``bigcall-N``
    One tool call whose arguments (``{"i": 0, "text": <N words>}``) stream in N chunks, then
    (once the result is in) an answer. For the cost of streaming long tool arguments.
``stream-forever``
    Streams one small token every ``--interval`` seconds and never ends (with ``stream=False``
    the request is simply never answered). For interrupt-latency tests.
anything else
    A text answer at once.

Tool calls name the first tool offered in the request (``"step"`` when none is) and carry the
arguments ``{"i": <int>}``. Endpoints: ``POST /v1/chat/completions`` (also ``/chat/completions``),
``POST /v1/messages`` (also ``/messages``), ``POST /v1/responses`` (the OpenAI Responses API,
see ``mock_responses``), ``GET /health``, ``GET /stats`` (requests and TCP
connections served so far: a client that drops its keep-alive connections shows up there).

Run it standalone::

    python -m benchmarks.mock_server --port 8000

or in-process (own event loop) with ``async with MockLLMServer() as server: server.base_url``,
or in a child process with ``with MockServerProcess() as server: server.base_url``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks.mock_responses import (
    responses_first_tool,
    responses_object,
    responses_stream,
    responses_tool_results,
)

__all__ = ["MockLLMServer", "MockServerProcess", "Plan", "plan_turn"]

_SCENARIO = re.compile(r"(steps|parallel|text|bigcall)-(\d+)")
_STATUS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


@dataclass(slots=True)
class Plan:
    """What the next assistant turn contains: tool calls, a text answer, or an endless stream."""

    calls: list[tuple[str, str, dict[str, Any]]]  # (id, name, arguments)
    text: str = ""
    forever: bool = False
    text_pieces: int = 3  # SSE chunks the text streams in
    arg_pieces: int = 2  # SSE chunks each call's argument JSON streams in


def plan_turn(model: str, tool_results: int, tool_name: str) -> Plan:
    """Decide the next turn of scenario ``model`` given how many tool results came back."""
    if model == "stream-forever":
        return Plan([], forever=True)
    match = _SCENARIO.fullmatch(model)
    if match is not None:
        kind, n = match.group(1), int(match.group(2))
        if kind == "steps" and tool_results < n:
            return Plan([(f"call_{tool_results}", tool_name, {"i": tool_results})])
        if kind == "parallel" and tool_results == 0 and n > 0:
            return Plan([(f"call_0_{j}", tool_name, {"i": j}) for j in range(n)])
        if kind == "text":  # a long answer: n tokens, one per chunk, then the usual sentence
            words = "".join(f"w{k:05d} " for k in range(n))
            return Plan([], f"{words}Done: {tool_results} tool results received.", text_pieces=n)
        if kind == "bigcall" and tool_results == 0:  # long arguments, in n chunks
            args = {"i": 0, "text": "".join(f"w{k:05d} " for k in range(n))}
            return Plan([("call_big", tool_name, args)], arg_pieces=n)
    return Plan([], text=f"Done: {tool_results} tool results received.")


def _openai_tool_results(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", ()) if m.get("role") == "tool")


def _anthropic_tool_results(body: dict[str, Any]) -> int:
    count = 0
    for m in body.get("messages", ()):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, list):
            count += sum(1 for b in content if b.get("type") == "tool_result")
    return count


def _first_tool(tools: list[dict[str, Any]] | None, key: str) -> str:
    if not tools:
        return "step"
    tool = tools[0]
    return str(tool["function"]["name"] if key == "openai" else tool["name"])


def _pieces(text: str, parts: int = 3) -> list[str]:
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


# --- OpenAI Chat Completions --------------------------------------------------------------


def _openai_usage(body: dict[str, Any], out: int) -> dict[str, int]:
    prompt = 10 * len(body.get("messages", ()))
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


def openai_completion(body: dict[str, Any], plan: Plan) -> bytes:
    """A non-streaming ``chat.completion`` object for ``plan``."""
    message: dict[str, Any] = {"role": "assistant", "content": plan.text or None}
    if plan.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for cid, n, a in plan.calls
        ]
    result = {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if plan.calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _openai_usage(body, 5 + 10 * len(plan.calls)),
    }
    return json.dumps(result).encode()


def _openai_chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def openai_stream(body: dict[str, Any], plan: Plan) -> bytes:
    """The whole SSE body of a finished streaming answer for ``plan``."""
    model = body.get("model", "")
    out = [_openai_chunk(model, {"role": "assistant", "content": ""})]
    if plan.text:
        out += [_openai_chunk(model, {"content": p}) for p in _pieces(plan.text, plan.text_pieces)]
    for j, (cid, name, args) in enumerate(plan.calls):
        head = {"index": j, "id": cid, "type": "function", "function": {"name": name}}
        head["function"]["arguments"] = ""
        out.append(_openai_chunk(model, {"tool_calls": [head]}))
        for p in _pieces(json.dumps(args), plan.arg_pieces):
            delta = {"tool_calls": [{"index": j, "function": {"arguments": p}}]}
            out.append(_openai_chunk(model, delta))
    out.append(_openai_chunk(model, {}, "tool_calls" if plan.calls else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": _openai_usage(body, 5 + 10 * len(plan.calls)),
        }
        out.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


# --- Anthropic Messages -------------------------------------------------------------------


def anthropic_message(body: dict[str, Any], plan: Plan) -> bytes:
    """A non-streaming Messages API ``message`` object for ``plan``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": plan.text}] if plan.text else []
    content += [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in plan.calls]
    result = {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": "tool_use" if plan.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10 * len(body.get("messages", ())), "output_tokens": 5},
    }
    return json.dumps(result).encode()


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


def _anthropic_start(body: dict[str, Any]) -> bytes:
    message = {
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10 * len(body.get("messages", ())), "output_tokens": 1},
    }
    return _event("message_start", {"type": "message_start", "message": message})


def anthropic_stream(body: dict[str, Any], plan: Plan) -> bytes:
    """The whole SSE body of a finished streaming Messages answer for ``plan``."""
    out = [_anthropic_start(body)]
    index = 0
    if plan.text:
        start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
        start["content_block"]["text"] = ""
        out.append(_event("content_block_start", start))
        for p in _pieces(plan.text, plan.text_pieces):
            delta = {"type": "text_delta", "text": p}
            out.append(
                _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0} | {"delta": delta},
                )
            )
        out.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for cid, name, args in plan.calls:
        block = {"type": "tool_use", "id": cid, "name": name, "input": {}}
        out.append(
            _event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for p in _pieces(json.dumps(args), plan.arg_pieces):
            delta = {"type": "input_json_delta", "partial_json": p}
            event = {"type": "content_block_delta", "index": index, "delta": delta}
            out.append(_event("content_block_delta", event))
        out.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = "tool_use" if plan.calls else "end_turn"
    delta_event = {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": 5},
    }
    out.append(_event("message_delta", delta_event))
    out.append(_event("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# --- HTTP/1.1 -----------------------------------------------------------------------------


def _head(status: int, content_type: bytes, length: int | None) -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%s\r\nConnection: keep-alive\r\n\r\n" % (
        status,
        _STATUS[status],
        content_type,
        framing,
    )


class _Connection(asyncio.Protocol):
    """One keep-alive connection: parses requests and answers them in order."""

    def __init__(self, server: MockLLMServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.forever: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections += 1
        self.server._live.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.forever is not None:
            self.forever.cancel()
        self.transport = None
        self.server._live.discard(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None and self.forever is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.buffer[:end]).split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body = bytes(self.buffer[end + 4 : total])
            del self.buffer[:total]
            method, path = lines[0].split(b" ", 2)[:2]
            self.server.requests += 1
            self._handle(method, path.split(b"?", 1)[0], body)

    def _send(self, status: int, payload: bytes, content_type: bytes = b"application/json") -> None:
        assert self.transport is not None
        self.transport.write(_head(status, content_type, len(payload)) + payload)

    def _handle(self, method: bytes, path: bytes, raw: bytes) -> None:
        if method == b"GET" and path == b"/health":
            self._send(200, b'{"status":"ok"}')
            return
        if method == b"GET" and path == b"/stats":
            stats = {"requests": self.server.requests, "connections": self.server.connections}
            self._send(200, json.dumps(stats).encode())
            return
        if method == b"POST" and path.endswith(b"/responses"):
            self._handle_responses(raw)
            return
        if method != b"POST" or not path.endswith((b"/chat/completions", b"/messages")):
            self._send(404, b'{"error":{"message":"not found","type":"not_found"}}')
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, b'{"error":{"message":"invalid JSON","type":"invalid_request"}}')
            return
        provider = "openai" if path.endswith(b"/chat/completions") else "anthropic"
        counter = _openai_tool_results if provider == "openai" else _anthropic_tool_results
        plan = plan_turn(
            str(body.get("model", "")), counter(body), _first_tool(body.get("tools"), provider)
        )
        stream = bool(body.get("stream"))
        if plan.forever:
            if stream:
                self.forever = asyncio.get_running_loop().create_task(
                    self._stream_forever(provider, body)
                )
            else:  # never answered; the client gives up or cancels
                self.forever = asyncio.get_running_loop().create_task(asyncio.sleep(1e9))
            return
        if provider == "openai":
            payload = openai_stream(body, plan) if stream else openai_completion(body, plan)
        else:
            payload = anthropic_stream(body, plan) if stream else anthropic_message(body, plan)
        self._send(200, payload, b"text/event-stream" if stream else b"application/json")

    def _handle_responses(self, raw: bytes) -> None:
        """``POST /v1/responses``: the OpenAI Responses API (see ``mock_responses``)."""
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, b'{"error":{"message":"invalid JSON","type":"invalid_request"}}')
            return
        plan = plan_turn(
            str(body.get("model", "")), responses_tool_results(body), responses_first_tool(body)
        )
        if body.get("stream"):
            self._send(200, responses_stream(body, plan), b"text/event-stream")
        else:
            self._send(200, responses_object(body, plan))

    async def _stream_forever(self, provider: str, body: dict[str, Any]) -> None:
        model = body.get("model", "")
        if provider == "openai":
            first = _openai_chunk(model, {"role": "assistant", "content": ""})
            token = _openai_chunk(model, {"content": "tok "})
        else:
            start = {"type": "content_block_start", "index": 0}
            start["content_block"] = {"type": "text", "text": ""}
            first = _anthropic_start(body) + _event("content_block_start", start)
            delta = {"type": "text_delta", "text": "tok "}
            token = _event(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            )
        transport = self.transport
        assert transport is not None
        transport.write(_head(200, b"text/event-stream", None))
        chunk = first
        while not transport.is_closing():
            transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            chunk = token
            await asyncio.sleep(self.server.interval)


class MockLLMServer:
    """The mock server, run on the current event loop.

        Args:
            host: Interface to bind (loopback only by default).
            port: TCP port; 0 picks a free one (read ``port`` after ``start``).
            interval: Seconds between tokens of ``text-N``
        A long answer: N words, streamed one per chunk, ending with the usual sentence.
    ``bigcall-N``
        One tool call whose arguments (``{"i": 0, "text": <N words>}``) stream in N chunks, then
        (once the result is in) an answer. For the cost of streaming long tool arguments.
    ``stream-forever``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, interval: float = 0.01) -> None:
        self.host = host
        self.port = port
        self.interval = interval
        self.requests = 0
        self.connections = 0
        self._live: set[_Connection] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return self.url + "/v1"

    async def start(self) -> None:
        """Bind and start serving."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop serving and drop open connections."""
        if self._server is not None:
            self._server.close()
            for conn in list(self._live):
                if conn.transport is not None:
                    conn.transport.abort()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> MockLLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class MockServerProcess:
    """The mock server in a child process (so it runs on another core than the benchmark).

    Use as a context manager: ``with MockServerProcess() as server: server.base_url``.
    """

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:port``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return self.url + "/v1"

    def __enter__(self) -> MockServerProcess:
        args = [sys.executable, "-m", "benchmarks.mock_server", "--port", "0"]
        args += ["--interval", str(self.interval)]
        root = pathlib.Path(__file__).resolve().parent.parent
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=root)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        match = re.search(r":(\d+)\s*$", line)
        if match is None:
            self.__exit__()
            raise RuntimeError(f"mock server did not start: {line!r}")
        self.port = int(match.group(1))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None


@contextlib.contextmanager
def _quiet_interrupt() -> Iterator[None]:
    with contextlib.suppress(KeyboardInterrupt):
        yield


async def _serve(host: str, port: int, interval: float) -> None:
    server = MockLLMServer(host, port, interval)
    await server.start()
    print(f"mock LLM server listening on {server.url}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: ``python -m benchmarks.mock_server --port 8000``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--interval", type=float, default=0.01, help="stream-forever token gap")
    args = parser.parse_args(argv)
    with _quiet_interrupt():
        asyncio.run(_serve(args.host, args.port, args.interval))


if __name__ == "__main__":
    main()
