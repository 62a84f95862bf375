"""A load check for a served deployment: no turn that a client saw succeed is ever missing.

``check_served_threads(urls)`` plays conversations against one or more workers of one
deployment (``create_app`` behind each URL, all on one store), sending each turn to the
next worker in turn, right after the previous turn's ``RUN_FINISHED``; then it reads every
thread back through ``GET /threads/{id}`` and checks it:

* every user turn that ended ``RUN_FINISHED`` success is stored exactly once, in order;
* each of them has exactly one answer (an assistant message with text) before the next;
* every tool call has its result;
* every turn's stream ended with its last event (``RUN_FINISHED`` or ``RUN_ERROR``): a
  stream cut short, or a connection reset, is a failure the client could not tell apart
  from a slow answer, so it counts as a problem.

**Faults.** ``fault`` is an async callable run once the first turn has ended, while the
load goes on (stop the database for a few seconds, fill its disk, restart Redis, then put it
back and return); conversations keep sending turns until it has returned. Every turn that
ended ``success`` must be stored afterwards; every other one must have ended as an error the
client saw (an HTTP error or ``RUN_ERROR``), never silently.

Also runnable as ``python -m agentkit.serve._check URL [URL ...] [--token T]
[--fault-command "shell command"]`` (the command is the fault: it breaks the store and
repairs it before it exits).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2

from agentkit._ids import new_id

__all__ = ["CLIENT_IDLE", "ServedCheck", "check_served_threads"]

CLIENT_IDLE = 2.0
"""Seconds the check's client keeps an idle connection: below the server's keep-alive."""


@dataclass
class ServedCheck:
    """What :func:`check_served_threads` found."""

    sent: int = 0
    """Turns sent."""
    succeeded: int = 0
    """Turns that ended ``RUN_FINISHED`` with the ``success`` outcome."""
    refused: dict[str, int] = field(default_factory=dict)
    """Turns answered with an HTTP error, by status code and error code."""
    failed: dict[str, int] = field(default_factory=dict)
    """Turns that ended ``RUN_ERROR``, by error code."""
    problems: list[str] = field(default_factory=list)
    """Every violation found in the stored threads (empty: the check passed)."""
    threads: list[str] = field(default_factory=list)
    """The thread ids the check created."""
    errors: list[tuple[str, str]] = field(default_factory=list)
    """``(thread id, outcome)`` of every turn that did not succeed (refused or failed)."""

    @property
    def lost(self) -> int:
        """Successful turns missing from the store."""
        return sum(1 for p in self.problems if p.startswith("lost"))

    @property
    def ok(self) -> bool:
        """Whether every stored thread passed."""
        return not self.problems


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


async def _turn(client: httpx2.AsyncClient, url: str, thread: str, text: str) -> str:
    """Send one turn; return ``"success"``, ``"error:<code>"`` or ``"http:<status>:<code>"``."""
    body = {
        "threadId": thread,
        "runId": new_id(nbytes=8),
        "messages": [{"id": new_id(nbytes=8), "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    last: dict[str, Any] = {}
    try:
        async with client.stream("POST", f"{url}/agui", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                try:
                    code = response.json()["error"]["code"]
                except (ValueError, KeyError, TypeError):
                    code = "?"
                return f"http:{response.status_code}:{code}"
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    last = json.loads(line[6:])
    except httpx2.TransportError as exc:  # a reset or a timeout: the client sees no answer
        return f"transport:{type(exc).__name__}:{last.get('type')}"
    if last.get("type") == "RUN_FINISHED":
        outcome = last.get("outcome") or {}
        return "success" if outcome.get("type") == "success" else f"finished:{outcome}"
    if last.get("type") == "RUN_ERROR":
        return f"error:{last.get('code')}"
    return f"cut:{last.get('type')}"  # the stream ended without its last event


def _verify(thread: str, messages: list[dict[str, Any]], sent: list[tuple[str, bool]]) -> list[str]:
    """The problems of one stored thread (``sent``: each turn's text, whether it succeeded)."""
    problems: list[str] = []
    users = [(i, m.get("content")) for i, m in enumerate(messages) if m.get("role") == "user"]
    texts = [t for _, t in users]
    ours = {text for text, _ in sent}
    stored = [t for t in texts if t in ours]
    for text, ok in sent:
        n = stored.count(text)
        if ok and n == 0:
            problems.append(f"lost: thread {thread}: the successful turn {text!r} is not stored")
        if n > 1:
            problems.append(f"duplicate: thread {thread}: {text!r} is stored {n} times")
    order = [text for text, _ in sent]
    if [t for t in order if t in stored] != list(dict.fromkeys(stored)):
        problems.append(f"order: thread {thread}: stored turns {stored} are out of order")
    bounds = [i for i, _ in users] + [len(messages)]
    for k, (index, content) in enumerate(users):
        if not any(content == s and ok for s, ok in sent):
            continue
        between = messages[index + 1 : bounds[k + 1]]
        answers = [m for m in between if m.get("role") == "assistant" and m.get("content")]
        if len(answers) != 1:
            problems.append(
                f"answers: thread {thread}: turn {content!r} has {len(answers)} answers, not 1"
            )
    called = {
        c.get("id")
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("toolCalls") or []
    }
    answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
    for call in sorted(str(c) for c in called - answered):
        problems.append(f"unpaired: thread {thread}: tool call {call} has no result")
    return problems


def _client(token: str | None, request_timeout: float) -> httpx2.AsyncClient:
    """The check's HTTP client: one connection per conversation, idle ones dropped early."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # Every conversation streams at once on a connection of its own (the client's default
    # pool of 100 would queue them). An idle connection is dropped well before the
    # server's keep-alive timeout (uvicorn: 5 s): reusing one the server is closing at
    # that moment fails the request with a reset (ReadError / "server disconnected"),
    # which is what equal idle timeouts on both ends do under load.
    limits = httpx2.Limits(
        max_connections=None, max_keepalive_connections=None, keepalive_expiry=CLIENT_IDLE
    )
    return httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(request_timeout), limits=limits
    )


def _record(report: ServedCheck, thread: str, text: str, outcome: str) -> bool:
    """Count one turn's outcome in ``report``; return whether it succeeded."""
    if outcome == "success":
        report.succeeded += 1
        return True
    report.errors.append((thread, outcome))
    if outcome.startswith("http:"):
        _count(report.refused, outcome[5:])
    else:
        _count(report.failed, outcome)
    if outcome.startswith(("cut:", "transport:")):
        report.problems.append(
            f"silent: thread {thread}: turn {text!r} ended without its last event ({outcome})"
        )
    return False


async def _read_back(
    client: httpx2.AsyncClient,
    url: str,
    sent: dict[str, list[tuple[str, bool]]],
    report: ServedCheck,
) -> None:
    """Read every thread back from ``url`` and add the problems of each to ``report``."""
    for thread, turns_sent in sent.items():
        report.threads.append(thread)
        got = await client.get(f"{url}/threads/{thread}")
        if got.status_code != 200:
            if any(ok for _, ok in turns_sent):
                report.problems.append(f"lost: thread {thread}: {got.status_code}")
            continue
        report.problems.extend(_verify(thread, got.json()["messages"], turns_sent))


async def check_served_threads(
    urls: Sequence[str],
    *,
    conversations: int = 10,
    turns: int = 3,
    token: str | None = None,
    concurrency: int | None = None,
    request_timeout: float = 120.0,
    fault: Callable[[ServedCheck], Awaitable[None]] | None = None,
    pause: float = 0.1,
) -> ServedCheck:
    """Play conversations round-robin over the workers of one deployment, then verify them.

    Conversation ``i`` sends its turn ``j`` to ``urls[(i + j) % len(urls)]`` as soon as its
    turn ``j - 1`` has ended, so consecutive turns of one thread land on different workers.

    Args:
        urls: The base URL of each worker (``http://host:port``), all on one store.
        conversations: How many threads to create.
        turns: Turns per thread.
        token: The bearer token, if the deployment has one.
        concurrency: How many conversations run at once (default: all).
        request_timeout: Seconds one turn may take.
        fault: Breaks the store and repairs it (see the module docs); called with the live
            report once the first turn has ended. The conversations keep sending turns
            until it returns (each at least ``turns``); the threads are read back after.
        pause: Seconds a conversation waits after a turn that did not succeed before it
            sends the next (a client backing off, so a store outage is not a busy loop).

    Returns:
        The counts and every problem found (``.ok`` is True when there is none).
    """
    if not urls:
        raise ValueError("check_served_threads needs at least one URL")
    report = ServedCheck()
    tag = new_id(nbytes=4)
    limit = anyio.Semaphore(concurrency or conversations)
    sent: dict[str, list[tuple[str, bool]]] = {}
    first_turn = anyio.Event()
    fault_over = anyio.Event()
    if fault is None:
        fault_over.set()
    async with _client(token, request_timeout) as client:

        async def conversation(i: int) -> None:
            thread = f"check-{tag}-{i}"
            sent[thread] = []
            async with limit:
                j = 0
                while j < turns or not fault_over.is_set():
                    url = urls[(i + j) % len(urls)].rstrip("/")
                    text = f"check {tag} conversation {i} turn {j}"
                    j += 1
                    outcome = await _turn(client, url, thread, text)
                    report.sent += 1
                    first_turn.set()
                    sent[thread].append((text, outcome == "success"))
                    if not _record(report, thread, text, outcome):
                        await anyio.sleep(pause)

        async def break_store() -> None:
            assert fault is not None
            await first_turn.wait()
            try:
                await fault(report)
            finally:
                fault_over.set()

        async with anyio.create_task_group() as tg:
            if fault is not None:
                tg.start_soon(break_store)
            for i in range(conversations):
                tg.start_soon(conversation, i)
        await _read_back(client, urls[0].rstrip("/"), sent, report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentkit.serve._check URL [URL ...]``: run the check, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--token")
    parser.add_argument(
        "--fault-command",
        help="a shell command run during the load that breaks the store and repairs it "
        "before it exits (e.g. 'systemctl stop postgresql; sleep 3; systemctl start postgresql')",
    )
    args = parser.parse_args(argv)
    fault = None
    if args.fault_command:
        command = str(args.fault_command)

        async def fault(_: ServedCheck) -> None:
            await anyio.to_thread.run_sync(lambda: subprocess.run(command, shell=True, check=False))

    report = anyio.run(
        lambda: check_served_threads(
            args.urls,
            conversations=args.conversations,
            turns=args.turns,
            token=args.token,
            fault=fault,
        )
    )
    print(
        f"sent {report.sent}, succeeded {report.succeeded}, refused {report.refused}, "
        f"failed {report.failed}, lost {report.lost}"
    )
    for problem in report.problems:
        print(problem)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
