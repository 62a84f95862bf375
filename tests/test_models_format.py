"""Message conversion edge cases of both wire formats (pure functions, no network)."""

from __future__ import annotations

from agentkit.messages import Msg
from agentkit.models import _anthropic_format as anth
from agentkit.models import _openai_format as oai
from agentkit.models._base import ToolDefinition

IMG = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QQ=="}}
WAV = {"type": "audio", "source": {"type": "base64", "media_type": "audio/wav", "data": "UklG"}}


def test_openai_skips_empty_assistant_turns_and_keeps_string_content() -> None:
    messages = [
        Msg("s", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "system"),
        Msg("a", [{"type": "thinking", "thinking": "only thoughts"}], "assistant"),
        Msg("a", "", "assistant"),
        Msg("u", [{"type": "text", "text": "hear this"}, WAV], "user"),
        Msg("a", "plain", "assistant"),
    ]
    assert oai.format_messages(messages) == [
        {"role": "system", "content": "a\nb"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hear this"},
                {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
            ],
        },
        {"role": "assistant", "content": "plain"},
    ]


def test_openai_tool_result_audio_follows_as_user_content_and_tool_choice() -> None:
    result = {
        "type": "tool_result",
        "id": "c",
        "name": "rec",
        "output": [{"type": "text", "text": "ok"}, WAV],
    }
    assert oai.format_messages([Msg("t", [result], "user")]) == [
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attachments returned by tool 'rec' (call c):"},
                {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
            ],
        },
    ]
    assert oai.format_tool_choice("required") == "required"
    assert oai.format_tool_choice("none") == "none"


def test_openai_non_streaming_parse_with_refusal_and_missing_ids() -> None:
    data = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "refusal": "I can't help with that.",
                    "tool_calls": [{"function": {"name": "f", "arguments": None}}],
                },
                "finish_reason": "stop",
            }
        ]
    }
    response = oai.parse_completion(data, 0.1)
    assert response.content[0] == {"type": "text", "text": "I can't help with that."}
    call = response.content[1]
    assert call["type"] == "tool_use" and call["id"].startswith("call_") and call["input"] == {}
    assert response.metadata == {"finish_reason": "stop", "refusal": "I can't help with that."}
    assert response.usage is None and response.id


def test_openai_stream_state_without_indexes_keeps_ids_stable() -> None:
    state = oai.OpenAIStreamState()
    state.feed(
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"x"'}}]
                    }
                }
            ]
        }
    )
    state.feed({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": ": 1}"}}]}}]})
    state.feed(
        {
            "choices": [
                {"delta": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": ""}}]}}
            ]
        }
    )
    state.feed({"choices": [{"delta": {"tool_calls": [{"index": 7, "function": {"name": "h"}}]}}]})
    first = state.snapshot(final=False)
    final = state.snapshot(final=True)
    assert [b["name"] for b in final.content] == ["f", "g", "h"]
    assert final.content[0]["input"] == {"x": 1}
    assert first.content[1]["raw_input"] == "" and final.content[1]["input"] == {}
    assert first.content[2]["id"] == final.content[2]["id"]  # generated once, then stable
    assert final.id == first.id


def test_anthropic_system_positions_merging_and_cache_hints() -> None:
    messages = [
        Msg("s", "rules", "system"),
        Msg("s", "more rules", "system"),
        Msg("u", [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}], "user"),
        Msg("s", "late reminder", "system"),
        Msg("u", [{"type": "text", "text": ""}, IMG], "user"),
        Msg("a", [{"type": "text", "text": "x"}], "assistant"),
        Msg("a", [{"type": "text", "text": "y"}], "assistant"),
    ]
    system, turns = anth.format_messages(messages)
    assert system == [{"type": "text", "text": "rules"}, {"type": "text", "text": "more rules"}]
    assert turns == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "late reminder"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "QQ=="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
        },
    ]


def test_anthropic_tool_results_in_assistant_message_are_split_out() -> None:
    # An assistant message holding both its call and the result: the result still goes in
    # the next user turn, where the API wants it.
    msg = Msg(
        "a",
        [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            {"type": "tool_result", "id": "t", "name": "f", "output": "done"},
        ],
        "assistant",
    )
    _, turns = anth.format_messages([Msg("u", "go", "user"), msg, Msg("u", "next", "user")])
    assert turns[1:] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "done"},
                {"type": "text", "text": "next"},
            ],
        },
    ]


def test_anthropic_tools_and_choices() -> None:
    tools = [
        ToolDefinition("a", "", {"type": "object", "properties": {}}),
        ToolDefinition("b", "bare schema", {}),
    ]
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    assert anth.format_tools(tools, [server_tool]) == [
        {"name": "a", "input_schema": {"type": "object", "properties": {}}},
        {
            "name": "b",
            "description": "bare schema",
            "input_schema": {"type": "object", "properties": {}},
        },
        server_tool,
    ]
    assert anth.format_tool_choice(None, None) is None
    assert anth.format_tool_choice(None, False) == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }
    assert anth.format_tool_choice("none", False) == {"type": "none"}
    assert anth.format_tool_choice("auto", True) == {"type": "auto"}
    assert anth.format_tool_choice("lookup", None) == {"type": "tool", "name": "lookup"}


def test_anthropic_non_streaming_parse() -> None:
    data = {
        "id": "msg_9",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "redacted_thinking", "data": "r"},
            {"type": "server_tool_use", "id": "x", "name": "web_search", "input": {}},
            {"type": "text", "text": "answer"},
            {"type": "tool_use", "id": "tu", "name": "f", "input": {"k": 1}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 7},
    }
    response = anth.parse_message(data, 0.5)
    assert response.content == [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "thinking", "thinking": "", "redacted_data": "r"},
        {
            "type": "provider_item",
            "provider": "anthropic",
            "item": {"type": "server_tool_use", "id": "x", "name": "web_search", "input": {}},
        },
        {"type": "text", "text": "answer"},
        {"type": "tool_use", "id": "tu", "name": "f", "input": {"k": 1}},
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.time) == (
        105,
        7,
        0.5,
    )
    assert response.id == "msg_9" and response.metadata == {"finish_reason": "tool_use"}


def test_round_trip_of_anthropic_answer_through_msg_json() -> None:
    # Thinking signatures and redacted thinking survive Msg serialization and go back as sent.
    blocks = [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "thinking", "thinking": "", "redacted_data": "r"},
        {"type": "tool_use", "id": "tu", "name": "f", "input": {"k": 1}},
    ]
    msg = Msg.from_dict(Msg("a", blocks, "assistant").to_dict())  # type: ignore[arg-type]
    _, turns = anth.format_messages([msg])
    assert turns[0]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "redacted_thinking", "data": "r"},
        {"type": "tool_use", "id": "tu", "name": "f", "input": {"k": 1}},
    ]


def test_anthropic_final_assistant_prefill_is_trimmed() -> None:
    # e.g. a partial answer kept by an interrupt, continued on resume
    _, turns = anth.format_messages(
        [Msg("u", "go", "user"), Msg("a", "Partial answer ", "assistant")]
    )
    assert turns[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Partial answer"}],
    }
    _, turns = anth.format_messages([Msg("u", "go", "user"), Msg("a", "  \n", "assistant")])
    assert turns == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


def test_anthropic_stream_tool_input_given_whole_at_block_start() -> None:
    state = anth.AnthropicStreamState()
    block = {"type": "tool_use", "id": "t", "name": "f", "input": {"x": 1}}
    state.feed({"type": "content_block_start", "index": 0, "content_block": block})
    state.feed({"type": "content_block_stop", "index": 0})
    state.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 3},
        }
    )
    final = state.snapshot(final=True)
    assert final.content == [{"type": "tool_use", "id": "t", "name": "f", "input": {"x": 1}}]
    assert final.usage is not None and final.usage.output_tokens == 3
