"""UserAgent: console and pluggable input, structured answers, interruption, hooks."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, Field

from agentkit.agent._user import UserAgent
from agentkit.exceptions import AgentBusyError
from agentkit.messages import Msg


class Answers:
    """A scripted human: returns prepared lines and records the prompts it saw."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.lines.pop(0)


class Booking(BaseModel):
    city: str
    nights: int = Field(gt=0)
    breakfast: bool = False


async def test_reply_shows_incoming_and_returns_user_msg() -> None:
    shown: list[str] = []
    human = Answers("hello there")
    user = UserAgent("ann", human, output_fn=shown.append)
    incoming = Msg(
        "bot",
        [
            {"type": "thinking", "thinking": "secret"},
            {"type": "text", "text": "How can I help?"},
            {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}},
        ],
        "assistant",
    )
    reply = await user(incoming)
    assert (reply.name, reply.role, reply.content) == ("ann", "user", "hello there")
    assert shown == ["bot: How can I help?\n[image]"]
    assert human.prompts == ["ann: "]
    assert reply.metadata is None


async def test_sync_input_runs_in_a_thread_and_loop_stays_responsive() -> None:
    main_thread = threading.get_ident()
    seen_threads: list[int] = []

    def slow_input(prompt: str) -> str:
        seen_threads.append(threading.get_ident())
        time.sleep(0.4)
        return "done"

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    user = UserAgent("u", slow_input, output_fn=lambda s: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        reply = await user()
        tg.cancel_scope.cancel()
    assert reply.get_text() == "done"
    assert seen_threads and seen_threads[0] != main_thread
    assert ticks >= 10


async def test_async_input_fn_and_async_callable_object() -> None:
    async def read(prompt: str) -> str:
        await anyio.sleep(0)
        return f"async:{prompt}"

    class Reader:
        async def __call__(self, prompt: str) -> str:
            return "object"

    assert (await UserAgent("a", read)()).get_text() == "async:a: "
    assert (await UserAgent("b", Reader(), prompt="> ")()).get_text() == "object"


async def test_input_fn_must_return_str() -> None:
    user = UserAgent("u", lambda p: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return a str"):
        await user()


async def test_default_input_reads_the_console(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("typed line\n"))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    reply = await UserAgent("console")()
    assert reply.get_text() == "typed line"


async def test_structured_input_validates_and_reasks() -> None:
    shown: list[str] = []
    human = Answers("not json", '{"city": "Oslo", "nights": 0}', '{"city": "Oslo", "nights": 2}')
    user = UserAgent("ann", human, output_fn=shown.append, max_attempts=3)
    reply = await user(output_type=Booking)
    assert reply.metadata == {"structured_input": {"city": "Oslo", "nights": 2, "breakfast": False}}
    assert reply.get_text() == '{"city": "Oslo", "nights": 2}'
    assert len(human.prompts) == 3
    assert "city (str, required)" in human.prompts[0]
    assert "breakfast (bool, default False)" in human.prompts[0]
    assert shown[0].startswith("Invalid answer (1/3)")
    assert "nights: Input should be greater than 0" in shown[1]


async def test_structured_input_gives_up_after_max_attempts() -> None:
    user = UserAgent("ann", Answers("{}", "[]"), output_fn=lambda s: None, max_attempts=2)
    with pytest.raises(ValueError, match="no valid Booking in 2 attempts"):
        await user(output_type=Booking)


async def test_structured_empty_line_accepts_defaults() -> None:
    class Prefs(BaseModel):
        verbose: bool = True

    reply = await UserAgent("u", Answers(""), output_fn=lambda s: None)(output_type=Prefs)
    assert reply.metadata == {"structured_input": {"verbose": True}}


async def test_interrupt_abandons_a_blocking_read() -> None:
    entered, release = threading.Event(), threading.Event()

    def blocked(prompt: str) -> str:
        entered.set()
        release.wait(10)
        return "too late"

    user = UserAgent("u", blocked, output_fn=lambda s: None)
    result: list[Msg] = []

    async def ask() -> None:
        result.append(await user())

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await anyio.to_thread.run_sync(entered.wait, 10)  # the read is blocking
            with pytest.raises(AgentBusyError):
                await user()
            assert user.is_replying
            assert await user.interrupt() is True
        # The interrupted call returned while the read was still blocked: it did not wait.
        assert result and not release.is_set()
    finally:
        release.set()
    assert result[0].metadata == {"interrupted": True}
    assert not user.is_replying and await user.interrupt() is False
    assert result[0].content == ""
    # The agent is usable again.
    user.input_fn = Answers("again")
    assert (await user()).get_text() == "again"


async def test_hooks_wrap_the_reply() -> None:
    calls: list[str] = []

    async def pre(agent: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        calls.append("pre")
        return {**kwargs, "msg": Msg("bot", "rewritten", "assistant")}

    def post(agent: Any, kwargs: dict[str, Any], output: Msg) -> Msg:
        calls.append(f"post:{output.get_text()}")
        return Msg(output.name, output.get_text().upper(), "user")

    shown: list[str] = []
    user = UserAgent("u", Answers("yes"), output_fn=shown.append)
    user.register_hook("pre_reply", "p", pre)
    user.register_hook("post_reply", "q", post)
    reply = await user(Msg("bot", "original", "assistant"))
    assert reply.get_text() == "YES"
    assert calls == ["pre", "post:yes"]
    assert shown == ["bot: rewritten"]
    user.remove_hook("post_reply", "q")
    with pytest.raises(KeyError):
        user.remove_hook("post_reply", "q")
    with pytest.raises(ValueError, match="unknown hook kind"):
        user.register_hook("bogus", "x", post)


async def test_observe_shows_messages() -> None:
    shown: list[str] = []
    user = UserAgent("u", Answers(), output_fn=shown.append)
    await user.observe([Msg("a", "one", "assistant"), Msg("b", "two", "assistant")])
    await user.observe(None)
    assert shown == ["a: one", "b: two"]


def test_max_attempts_validated() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        UserAgent("u", max_attempts=0)
