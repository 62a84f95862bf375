"""Hooks (also under parallel tool calls) and the event stream."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from agentkit import Capability, ModelRequest, RunContext, ToolUseBlock
from agentkit.events import (
    ReplyFinished,
    ReplyStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolProgress,
    ToolResult,
)
from agentkit.exceptions import ModelAPIError, UsageError
from agentkit.messages import Msg
from agentkit.models import ChatResponse, ToolDefinition
from agentkit.testing import ScriptedModel, text, thinking, tool_use
from agentkit.tools import ToolContext, ToolResponse
from tests._agent_helpers import (
    Recorder,
    agent_for,
    checked_memory,
    refuse_capability_points,
    results_of,
)


async def test_acting_hooks_fire_once_per_call_under_parallel_calls():
    counts: Counter[str] = Counter()
    in_hook = 0
    max_in_hook = 0

    async def pre(agent, kwargs):
        nonlocal in_hook, max_in_hook
        counts["pre:" + kwargs["tool_call"]["id"]] += 1
        in_hook += 1
        max_in_hook = max(max_in_hook, in_hook)
        await anyio.sleep(0.02)
        in_hook -= 1

    def post(agent, kwargs, output):
        counts["post:" + kwargs["tool_call"]["id"]] += 1

    calls = [tool_use("sleep", f"c{i}", label=f"t{i}", seconds=0.01) for i in range(5)]
    agent = agent_for(ScriptedModel([calls, "ok"]))
    agent.register_hook("pre_acting", "count", pre)
    agent.register_hook("post_acting", "count", post)
    await agent("go")
    assert counts == Counter({f"{k}:c{i}": 1 for i in range(5) for k in ("pre", "post")})
    assert max_in_hook == 5  # the hooks ran concurrently, one pair per call
    await checked_memory(agent)


async def test_hooks_can_rewrite_kwargs_and_outputs():
    rec = Recorder()
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "three"])
    agent = agent_for(model, rec)

    def double_a(agent, kwargs):
        call = kwargs["tool_call"]
        return {**kwargs, "tool_call": {**call, "input": {**call["input"], "a": 10}}}

    async def shout(agent, kwargs, output: ToolResponse):
        return ToolResponse.text(output.get_text() + "!")

    def add_note(agent, kwargs):
        return {**kwargs, "messages": [*kwargs["messages"], Msg("user", "note", "user")]}

    def tag_reply(agent, kwargs, reply: Msg):
        reply.metadata["tagged"] = True

    agent.register_hook("pre_acting", "a", double_a)
    agent.register_hook("post_acting", "b", shout)
    agent.register_hook("pre_reasoning", "c", add_note)
    agent.register_hook("post_reply", "d", tag_reply)
    reply = await agent("go")
    assert reply.metadata["tagged"] is True
    assert results_of(await checked_memory(agent))["c1"] == ("12!", False)
    assert rec.calls == {"add10+2": 1}
    assert model.requests[0].messages[-1].get_text() == "note"
    memory = await agent.memory.get_memory()
    assert all(m.get_text() != "note" for m in memory)  # prompt-only, never stored


async def test_pre_reply_post_reasoning_and_hook_management():
    seen = []
    model = ScriptedModel(["original"])
    agent = agent_for(model)

    def pre_reply(agent, kwargs):
        seen.append("pre_reply")
        return {**kwargs, "msg": "rewritten input"}

    def post_reasoning(agent, kwargs, msg: Msg):
        seen.append("post_reasoning")
        return Msg(msg.name, "edited", "assistant")

    agent.register_hook("pre_reply", "p", pre_reply)
    agent.register_hook("post_reasoning", "r", post_reasoning)
    agent.register_hook("post_reply", "x", lambda a, k, o: seen.append("removed"))
    agent.remove_hook("post_reply", "x")
    with pytest.raises(KeyError):
        agent.remove_hook("post_reply", "x")
    with pytest.raises(ValueError, match="unknown hook kind"):
        agent.register_hook("during_reply", "x", print)
    reply = await agent("input")
    assert reply.get_text() == "edited"
    assert seen == ["pre_reply", "post_reasoning"]
    memory = await checked_memory(agent)
    assert [m.get_text() for m in memory] == ["rewritten input", "edited"]
    agent.clear_hooks()
    agent.model = ScriptedModel(["plain"])
    assert (await agent("again")).get_text() == "plain"


async def test_a_raising_acting_hook_becomes_an_error_result():
    def bad(agent, kwargs):
        if kwargs["tool_call"]["id"] == "c1":
            raise RuntimeError("hook bug")

    calls = [tool_use("add", "c1", a=1, b=1), tool_use("add", "c2", a=2, b=2)]
    agent = agent_for(ScriptedModel([calls, "ok"]))
    agent.register_hook("pre_acting", "bad", bad)
    await agent("go")
    results = results_of(await checked_memory(agent))
    assert results["c1"][1] is True and "hook bug" in results["c1"][0]
    assert results["c2"] == ("4", False)


class _Trace(Capability[Any]):
    """Logs the loop points it is called at, and what it sees there."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        self.log.append(f"before_model:{request.messages[-1].get_text()}")
        return request

    async def after_model(self, ctx: RunContext[Any], response: ChatResponse) -> ChatResponse:
        self.log.append(f"after_model:{response.get_text()}")
        return response

    async def before_tool(
        self, ctx: ToolContext[Any], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        self.log.append(f"before_tool:{call['input']['a']}")
        return call

    async def after_tool(self, ctx: ToolContext[Any], result: ToolResponse) -> ToolResponse:
        self.log.append(f"after_tool:{result.get_text()}")
        return result


async def test_string_hooks_run_before_the_capabilities_at_every_point():
    log: list[str] = []
    model = ScriptedModel([[text("adding"), tool_use("add", "c1", a=1, b=2)], "three"])
    agent = agent_for(model, capabilities=[_Trace(log)])

    def pre_reasoning(agent, kwargs):
        log.append("pre_reasoning")
        return {**kwargs, "messages": [*kwargs["messages"], Msg("user", "note", "user")]}

    def post_reasoning(agent, kwargs, msg: Msg):
        log.append("post_reasoning")
        return Msg(msg.name, [*msg.get_content_blocks(), text("!")], "assistant")

    def pre_acting(agent, kwargs):
        log.append("pre_acting")
        call = kwargs["tool_call"]
        return {**kwargs, "tool_call": {**call, "input": {**call["input"], "a": 10}}}

    def post_acting(agent, kwargs, result: ToolResponse):
        log.append(f"post_acting:{kwargs['tool_call']['input']['a']}")  # the call as it ran
        return ToolResponse.text(result.get_text() + "?")

    for kind, fn in [
        ("pre_reasoning", pre_reasoning),
        ("post_reasoning", post_reasoning),
        ("pre_acting", pre_acting),
        ("post_acting", post_acting),
    ]:
        agent.register_hook(kind, "h", fn)
    reply = await agent("go")
    assert log == [
        "pre_reasoning",
        "before_model:note",  # the capability sees the request the hook made
        "post_reasoning",
        "after_model:adding!",  # and the answer the hook edited
        "pre_acting",
        "before_tool:10",
        "post_acting:10",
        "after_tool:12?",
        "pre_reasoning",
        "before_model:note",
        "post_reasoning",
        "after_model:three!",
    ]
    assert reply.get_text() == "three\n!"  # two text blocks
    assert results_of(await checked_memory(agent))["c1"] == ("12?", False)


async def test_reasoning_hooks_map_onto_the_request_and_the_stored_answer():
    model = ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "three"])
    agent = agent_for(model)
    seen: list[object] = []

    def pre_reasoning(agent, kwargs):
        assert {t.name for t in kwargs["tools"]} >= {"add"}
        return {**kwargs, "tool_choice": "none"} if kwargs["tool_choice"] is None else None

    def post_reasoning(agent, kwargs, msg: Msg):
        seen.append(kwargs["tool_choice"])  # the kwargs pre_reasoning returned
        msg.metadata = {**(msg.metadata or {}), "checked": True}  # in place, None returned

    agent.register_hook("pre_reasoning", "p", pre_reasoning)
    agent.register_hook("post_reasoning", "q", post_reasoning)
    await agent("go")
    assert model.requests[0].settings["tool_choice"] == "none"
    assert seen == ["none", "none"]
    answers = [m for m in await checked_memory(agent) if m.role == "assistant"]
    assert [m.metadata.get("checked") for m in answers] == [True, True]


async def test_an_agent_with_reply_hooks_only_adds_no_capability(monkeypatch):
    refuse_capability_points(monkeypatch)
    heard: list[str] = []
    agent = agent_for(ScriptedModel([[tool_use("add", "c1", a=1, b=2)], "three"]))
    agent.register_hook("pre_reply", "p", lambda a, k: heard.append("pre"))
    agent.register_hook("post_reply", "q", lambda a, k, o: heard.append("post"))
    assert (await agent("go")).get_text() == "three"
    assert heard == ["pre", "post"]
    assert agent.capabilities == ()


async def test_a_hook_registered_or_removed_between_runs_counts_from_the_next_run():
    calls: list[str] = []
    model = ScriptedModel(
        [[tool_use("add", "c1", a=1, b=1)], "one", [tool_use("add", "c2", a=2, b=2)], "two"]
    )
    agent = agent_for(model)
    await agent("first")
    agent.register_hook("pre_acting", "log", lambda a, k: calls.append(k["tool_call"]["id"]))
    await agent("second")
    assert calls == ["c2"]
    agent.remove_hook("pre_acting", "log")
    agent.model = ScriptedModel([[tool_use("add", "c3", a=3, b=3)], "three"])
    await agent("third")
    assert calls == ["c2"]
    await checked_memory(agent)


async def test_events_arrive_in_order():
    model = ScriptedModel(
        [
            [thinking("Let me think."), text("I will add."), tool_use("add", "c1", a=1, b=2)],
            "The answer is 3.",
        ],
        stream=True,
        chunks_per_block=3,
    )
    agent = agent_for(model)
    events = []
    async with agent.stream("go") as stream:
        async for event in stream:
            events.append(event)
    kinds = [e.type for e in events]
    assert kinds[0] == "reply_started" and kinds[-1] == "reply_finished"
    thinking_text = "".join(e.delta for e in events if isinstance(e, ThinkingDelta))
    assert thinking_text == "Let me think."
    answer = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert answer == "I will add.The answer is 3."
    start = kinds.index("tool_call_started")
    assert kinds[start + 1] == "tool_result"
    assert kinds.index("thinking_delta") < kinds.index("text_delta") < start
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.tool_call_id == "c1" and result.result["output"] == "3"
    assert isinstance(events[-1], ReplyFinished)
    assert events[-1].reply.get_text() == "The answer is 3."
    assert stream.reply is events[-1].reply
    assert isinstance(events[0], ReplyStarted)


async def test_tool_progress_events_and_plain_iteration():
    agent = agent_for(ScriptedModel([[tool_use("report", "c1")], "ok"]))

    async def report(ctx: ToolContext) -> str:
        """Reports progress."""
        await ctx.report_progress("half", progress=1, total=2)
        await ctx.report_progress("all", progress=2, total=2)
        return "reported"

    agent.toolkit.register_tool_function(report)
    events = [event async for event in agent.stream("go")]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert len(progress) == 2 and all(p.tool_call_id == "c1" for p in progress)
    kinds = [e.type for e in events]
    assert kinds.index("tool_call_started") < kinds.index("tool_progress")
    assert kinds.index("tool_progress") < kinds.index("tool_result")
    assert isinstance(events[-1], ReplyFinished)


async def test_stream_reraises_reply_errors_unwrapped():
    agent = agent_for(ScriptedModel([ModelAPIError("down", status_code=503)]))

    async def consume_in_block() -> None:
        async with agent.stream("go") as stream:
            async for _ in stream:
                pass

    async def consume_plain() -> None:
        async for _ in agent.stream("go"):
            pass

    with pytest.raises(ModelAPIError, match="down"):
        await consume_in_block()
    agent.model = ScriptedModel([ModelAPIError("down again")])
    with pytest.raises(ModelAPIError, match="down again"):
        await consume_plain()
    await checked_memory(agent)


async def test_no_listener_means_no_event_objects(monkeypatch):
    built = []
    original = TextDelta.__init__

    def spy(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(TextDelta, "__init__", spy)
    agent = agent_for(ScriptedModel(["streamed text"], stream=True))
    await agent("go")
    assert built == []
    assert isinstance(ToolCallStarted, type)


async def test_a_builtin_tool_added_by_pre_reasoning_is_sent_as_a_builtin_tool():
    spec = {"type": "web_search_20250305", "name": "web_search"}
    model = ScriptedModel(["ok", "ok"])
    agent = agent_for(model)

    def add_search(a: object, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            **kwargs,
            "tools": [*kwargs["tools"], ToolDefinition("web_search", "", {}, native=spec)],
        }

    agent.register_hook("pre_reasoning", "search", add_search)
    await agent("go")
    assert model.requests[0].builtin_tools == [spec]
    assert all(t.native is None for t in model.requests[0].tools)
    seen: list[list[str]] = []

    def look(a: object, kwargs: dict[str, Any]) -> None:  # a built-in tool is in ``tools``
        seen.append([t.name for t in kwargs["tools"] if t.native is not None])

    agent.register_hook("pre_reasoning", "look", look)
    await agent("again")
    assert seen == [["web_search"]]


async def test_post_reasoning_sees_the_answer_as_stored_and_may_not_rename_it():
    """The max-iters summary allows no calls: the hook never sees one; a new author is refused."""
    model = ScriptedModel(
        [[tool_use("add", "c1", a=1, b=2)], [text("3"), tool_use("add", "c2", a=0, b=0)]]
    )
    agent = agent_for(model, max_iters=1)
    seen: list[list[str]] = []

    def post(a: object, kwargs: dict[str, Any], msg: Msg) -> None:
        seen.append([b["type"] for b in msg.get_content_blocks()])

    agent.register_hook("post_reasoning", "look", post)
    await agent("go")
    assert seen == [["tool_use"], ["text"]]
    renamer = agent_for(ScriptedModel(["hi"]))
    renamer.register_hook(
        "post_reasoning", "rename", lambda a, k, m: Msg("other", "hi", "assistant")
    )
    with pytest.raises(UsageError, match="author or role"):
        await renamer("go")
    await checked_memory(renamer)
