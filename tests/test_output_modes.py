"""Output modes (ToolOutput / NativeOutput / PromptedOutput) and PartialOutput events.

With ScriptedModel (tool-call arguments and text streamed in pieces) and over the OpenAI
Chat, OpenAI Responses and Anthropic wire (tests/_wire_server.py, answers shaped as the
providers document them: JSON text for ``json_schema`` / structured outputs).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agentkit import NativeOutput, PromptedOutput, ReActAgent, ToolOutput, ToolRetry
from agentkit.agent._partial import parse_partial_json, partial_ok
from agentkit.events import AgentEvent, PartialOutput
from agentkit.exceptions import StructuredOutputError, UsageError
from agentkit.models import AnthropicChatModel, ChatModel, OpenAIChatModel, OpenAIResponsesModel
from agentkit.models._base import ChatResponse, ModelRequest
from agentkit.models._http import RetryPolicy
from agentkit.testing import ScriptedModel, text, tool_use
from tests._wire_server import (
    Stream,
    WireServer,
    anthropic_stream,
    openai_chunks,
    responses_message,
    responses_stream,
)

FAST = RetryPolicy(max_retries=0, initial_delay=0.001, max_delay=0.005)


class Owner(BaseModel):
    name: str
    team: str


class Ticket(BaseModel):
    """A support ticket."""

    title: str
    priority: Literal["low", "high"]
    tags: list[str]
    owner: Owner
    estimate: float = 1.0


class Refund(BaseModel):
    """A refund to pay."""

    order: str
    amount: float


TICKET = {
    "title": "Printer on fire",
    "priority": "high",
    "tags": ["hardware", "urgent"],
    "owner": {"name": "Ada", "team": "ops"},
}
TICKET_JSON = json.dumps(TICKET)


async def streamed(agent: ReActAgent[Any, Any], output_type: Any) -> tuple[list[AgentEvent], Any]:
    events: list[AgentEvent] = []
    async with agent.stream("file it", output_type=output_type) as stream:
        async for event in stream:
            events.append(event)
    return events, stream.result


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a partial (nested objects included)."""
    if not isinstance(value, dict):
        return set()
    out: set[str] = set()
    for key, sub in value.items():
        out.add(prefix + key)
        out |= _keys(sub, f"{prefix}{key}.")
    return out


def check_partials(events: Sequence[AgentEvent], model: type[BaseModel], output: Any) -> None:
    """Every partial validates with missing fields allowed, none loses a key, last = output."""
    partials = [e.partial for e in events if isinstance(e, PartialOutput)]
    assert len(partials) >= 3, partials  # it took shape in steps, not in one go
    for before, after in itertools.pairwise(partials):
        assert _keys(before) <= _keys(after), (before, after)
        assert before != after  # only changes are sent
    for partial in partials:
        assert partial_ok(model, partial), partial
    assert partials[-1] == output.model_dump(mode="json")
    finished = next(i for i, e in enumerate(events) if e.type == "reply_finished")
    assert max(i for i, e in enumerate(events) if isinstance(e, PartialOutput)) < finished


def scripted_agent(*answers: Any, **kwargs: Any) -> tuple[ScriptedModel, ReActAgent[Any, Any]]:
    model = ScriptedModel(list(answers), stream=True, chunks_per_block=12)
    return model, ReActAgent("bot", "You file tickets.", model, **kwargs)


# -- the partial-JSON parser ---------------------------------------------------------------
def test_every_prefix_of_a_json_document_parses_and_keys_only_grow() -> None:
    doc = json.dumps({**TICKET, "note": 'a "quoted" \\ line\n\u00e9', "n": -12.5e1, "ok": True})
    seen: set[str] = set()
    for end in range(len(doc) + 1):
        value = parse_partial_json(doc[:end])
        keys = _keys(value)
        assert seen <= keys, doc[:end]
        seen = keys
    assert parse_partial_json(doc) == json.loads(doc)
    assert parse_partial_json('```json\n{"a": [1, {"b": "x') == {"a": [1, {"b": "x"}]}
    assert parse_partial_json('{"a": tr') == {} and parse_partial_json('{"a": -') == {}
    assert parse_partial_json("no json here") is None and parse_partial_json('{"a" 1}') is None


# -- ScriptedModel ------------------------------------------------------------------------
async def test_tool_output_streams_partials_from_the_response_tool_arguments() -> None:
    model, agent = scripted_agent([tool_use("generate_response", "r1", **TICKET)])
    events, result = await streamed(agent, ToolOutput(Ticket))
    assert isinstance(result.output, Ticket) and result.output.owner.team == "ops"
    check_partials(events, Ticket, result.output)
    assert "estimate" in [e for e in events if isinstance(e, PartialOutput)][-1].partial
    assert model.requests[0].settings.get("tool_choice") == "required"
    assert "generate_response" in model.requests[0].tool_names


async def test_union_partials_follow_the_member_whose_tool_is_called() -> None:
    refund = {"order": "A-1234567", "amount": 12.5}
    _, agent = scripted_agent([tool_use("generate_response_Refund", "r1", **refund)])
    events, result = await streamed(agent, ToolOutput(Ticket | Refund))
    assert isinstance(result.output, Refund)
    check_partials(events, Refund, result.output)


async def test_native_output_asks_the_model_for_the_schema_and_reads_the_text() -> None:
    model, agent = scripted_agent(TICKET_JSON, output_type=NativeOutput(Ticket))
    events, result = await streamed(agent, None)
    assert isinstance(result.output, Ticket) and result.output.tags == ["hardware", "urgent"]
    check_partials(events, Ticket, result.output)
    request = model.requests[0]
    assert request.native_output is Ticket  # what the adapters read: their JSON-schema mode
    assert "generate_response" not in request.tool_names
    assert request.settings.get("tool_choice") is None


async def test_prompted_output_gives_the_schema_and_retries_invalid_json() -> None:
    model, agent = scripted_agent(
        '{"title": "Printer on fire", "priority": "high",',  # cut short: not JSON
        f"Here it is:\n```json\n{TICKET_JSON}\n```",
    )
    events, result = await streamed(agent, PromptedOutput(Ticket))
    assert isinstance(result.output, Ticket)
    system = model.requests[0].messages[0].get_text()
    assert "JSON schema" in system and '"priority"' in system
    assert model.requests[0].native_output is None  # not the provider's mode
    retry = model.requests[1].messages[-1]
    assert retry.role == "user" and "not valid JSON" in retry.get_text()
    assert [e.partial for e in events if isinstance(e, PartialOutput)][-1] == (
        result.output.model_dump(mode="json")
    )
    memory = await agent.memory.get_memory()
    assert [m.role for m in memory] == ["user", "assistant", "user", "assistant"]


async def test_prompted_output_gives_up_after_the_bounded_retries() -> None:
    _, agent = scripted_agent(*(["not json"] * 4))
    with pytest.raises(StructuredOutputError, match="Ticket"):
        await agent.run("file it", output_type=PromptedOutput(Ticket))


async def test_output_validators_judge_text_mode_answers_too() -> None:
    small = json.dumps({**TICKET, "priority": "low"})
    model, agent = scripted_agent(small, TICKET_JSON, output_type=NativeOutput(Ticket))

    @agent.output_validator
    def urgent_only(ctx: Any, out: Ticket) -> Ticket:
        if out.priority != "high":
            raise ToolRetry("only high-priority tickets are filed")
        return out

    result = await agent.run("file it")
    assert result.output.priority == "high"
    assert "only high-priority" in model.requests[1].messages[-1].get_text()


class PlainModel(ChatModel):
    """An adapter with tools but no JSON-schema mode."""

    def __init__(self, answers: list[ChatResponse]) -> None:
        super().__init__("plain")
        self.answers = answers
        self.seen: list[list[str]] = []

    async def _request(self, request: ModelRequest) -> ChatResponse:
        self.seen.append(request.tool_names)
        return self.answers.pop(0)


async def test_native_output_without_a_native_mode_is_refused_or_falls_back_when_asked() -> None:
    plain = PlainModel([])
    agent = ReActAgent("bot", "sys", plain)
    with pytest.raises(UsageError, match=r"NativeOutput\(Ticket\).*'native'.*PlainModel"):
        await agent.run("file it", output_type=NativeOutput(Ticket))
    assert plain.seen == []  # refused before any request
    call = tool_use("generate_response", "r1", **TICKET)
    fallback = PlainModel([ChatResponse(content=[call])])
    agent = ReActAgent("bot", "sys", fallback)
    result = await agent.run("file it", output_type=NativeOutput(Ticket, fallback="tool"))
    assert result.output == Ticket.model_validate(TICKET)
    assert fallback.seen == [["generate_response"]]


def test_a_text_mode_takes_one_model_not_a_union() -> None:
    with pytest.raises(UsageError, match="ToolOutput"):
        ReActAgent("bot", "sys", ScriptedModel([]), output_type=NativeOutput(Ticket | Refund))  # type: ignore[arg-type]


# -- over the wire ------------------------------------------------------------------------
@pytest.fixture
async def server() -> Any:
    async with WireServer() as srv:
        yield srv


async def _wire_run(model: ChatModel, output_type: Any) -> tuple[list[AgentEvent], Any]:
    agent = ReActAgent("bot", "You file tickets.", model)
    try:
        return await streamed(agent, output_type)
    finally:
        await model.aclose()


async def test_openai_chat_native_output_is_a_json_schema_response_format(
    server: WireServer,
) -> None:
    server.script(Stream(openai_chunks(TICKET_JSON, parts=10)))
    model = OpenAIChatModel("gpt", api_key="k", base_url=server.openai_url, stream=True, retry=FAST)
    events, result = await _wire_run(model, NativeOutput(Ticket))
    check_partials(events, Ticket, result.output)
    body = server.requests[0].json
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Ticket"
    assert "tools" not in body


async def test_openai_chat_tool_output_partials_come_from_streamed_arguments(
    server: WireServer,
) -> None:
    call = ("call_1", "generate_response", TICKET_JSON)
    server.script(Stream(openai_chunks(tool_calls=[call], parts=10)))
    model = OpenAIChatModel("gpt", api_key="k", base_url=server.openai_url, stream=True, retry=FAST)
    events, result = await _wire_run(model, Ticket)
    check_partials(events, Ticket, result.output)
    assert server.requests[0].json["tool_choice"] == "required"


async def test_openai_responses_native_output_is_a_text_format(server: WireServer) -> None:
    server.script(Stream(responses_stream([responses_message(TICKET_JSON)], parts=10)))
    model = OpenAIResponsesModel(
        "gpt", api_key="k", base_url=server.openai_url, stream=True, retry=FAST
    )
    events, result = await _wire_run(model, NativeOutput(Ticket))
    check_partials(events, Ticket, result.output)
    fmt = server.requests[0].json["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "Ticket"


async def test_anthropic_native_output_is_output_config_format(server: WireServer) -> None:
    server.script(Stream(anthropic_stream([{"type": "text", "text": TICKET_JSON}], parts=10)))
    model = AnthropicChatModel("claude", api_key="k", base_url=server.anthropic_url, stream=True)
    events, result = await _wire_run(model, NativeOutput(Ticket))
    check_partials(events, Ticket, result.output)
    body = server.requests[0].json
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["$defs"]["Owner"]["additionalProperties"] is False
    assert "tools" not in body


async def test_anthropic_prompted_and_tool_output_stream_partials(server: WireServer) -> None:
    call = {"type": "tool_use", "id": "t1", "name": "generate_response", "input": TICKET}
    server.script(
        Stream(anthropic_stream([call], parts=10)),
        Stream(anthropic_stream([{"type": "text", "text": TICKET_JSON}], parts=10)),
    )
    model = AnthropicChatModel("claude", api_key="k", base_url=server.anthropic_url, stream=True)
    agent = ReActAgent("bot", "You file tickets.", model)
    events, result = await streamed(agent, Ticket)
    check_partials(events, Ticket, result.output)
    events, result = await streamed(agent, PromptedOutput(Ticket))
    check_partials(events, Ticket, result.output)
    prompted = server.requests[1].json
    assert "JSON schema" in prompted["system"][0]["text"] and "output_config" not in prompted
    await model.aclose()


async def test_a_scripted_text_block_answer_works_unstreamed() -> None:
    model = ScriptedModel([[text(TICKET_JSON)]])
    agent = ReActAgent("bot", "sys", model, output_type=NativeOutput(Ticket))
    result = await agent.run("file it")
    assert result.output.owner.name == "Ada"
