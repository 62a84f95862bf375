"""Provider-independent helpers of the adapters: tool arguments, structured output, usage."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentkit._ids import new_id
from agentkit._text import MAX_JSON_DEPTH, clean_json, clean_text, is_clean, too_deep
from agentkit.exceptions import ModelResponseError
from agentkit.messages import ContentBlock, ToolResultBlock, ToolUseBlock

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.models._base import ChatResponse, ModelSettings
    from agentkit.models._json import JSONObject, JSONValue

__all__ = [
    "ANTHROPIC_STOP_REASONS",
    "CHAT_FINISH_REASONS",
    "RESPONSES_FINISH_REASONS",
    "apply_structured_output",
    "body_fields",
    "closed_schema",
    "finish_metadata",
    "json_schema_spec",
    "parse_arguments",
    "require_extra",
    "split_tool_results",
    "tool_use_block",
]


logger = logging.getLogger("agentkit.models")

CHAT_FINISH_REASONS = frozenset(
    (
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "function_call",  # OpenAI's documented values
        "model_length",  # Mistral: the context window is full
        "error",  # Mistral
        "insufficient_system_resource",  # DeepSeek: the answer was cut by the server
    )
)
"""The finish reasons Chat Completions servers document; any other one is ``"other"``."""

ANTHROPIC_STOP_REASONS = frozenset(
    (
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    )
)
"""The Messages API's documented ``stop_reason`` values."""

RESPONSES_FINISH_REASONS = frozenset(("stop", "length", "tool_calls", "content_filter"))
"""What the Responses adapter reports (see ``_responses_format.finish_reason``)."""

# Unknown finish reasons already warned about: a warning once per value, then debug lines.
_WARNED: set[str] = set()
_MAX_WARNED = 64


# Settings every adapter reads itself: how the request is sent, not what its body holds.
_NOT_BODY = frozenset({"extra_headers", "timeout", "tool_choice", "extra_body"})


def body_fields(settings: ModelSettings) -> dict[str, object]:
    """The settings that become body fields, ``extra_body``'s merged in (it wins).

    ``extra_headers``, ``timeout`` and ``tool_choice`` are left out: each adapter sends
    them its own way.
    """
    fields: dict[str, object] = {k: v for k, v in settings.items() if k not in _NOT_BODY}
    extra = settings.get("extra_body")
    if isinstance(extra, dict):
        fields.update(extra)
    return fields


def finish_metadata(reason: object, known: frozenset[str]) -> dict[str, object]:
    """The ``finish_reason`` metadata of an answer, from the provider's own value.

    A value outside ``known`` (the API's documented ones) reads ``"other"``, so code
    testing for ``"length"`` or ``"tool_calls"`` never meets a value it cannot know; the
    provider's value is kept as ``provider_finish_reason`` and logged (a warning the first
    time a value is seen, debug after).

    Args:
        reason: The provider's finish reason (None when it gave none).
        known: The documented values of the API.
    """
    if reason is None or (isinstance(reason, str) and reason in known):
        return {"finish_reason": reason}
    value = str(reason)[:100]
    if value not in _WARNED and len(_WARNED) < _MAX_WARNED:
        _WARNED.add(value)
        logger.warning("unknown finish reason %r from the provider, reported as 'other'", value)
    else:
        logger.debug("unknown finish reason %r from the provider, reported as 'other'", value)
    return {"finish_reason": "other", "provider_finish_reason": value}


def parse_arguments(raw: str) -> dict[str, object] | None:
    """The arguments as a JSON object, or None while/when they are not one.

    Empty arguments mean "no arguments" (servers send ``""`` for parameterless tools).
    Arguments nested deeper than ``MAX_JSON_DEPTH`` levels count as malformed.
    """
    text = raw.strip()
    if not text:
        return {}
    if not text.endswith("}"):  # cheap pre-check: a partial object never ends with "}"...
        return None
    try:
        value = json.loads(text)
    except ValueError:  # ...except when a string value ends with "}" mid-stream
        return None
    except RecursionError:  # nested too deeply: refused like malformed JSON
        return None
    if not isinstance(value, dict):
        return None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and too_deep(value):
        return None  # every later walk (validation, saving) would overflow the stack
    return value


# A JSON escape of a surrogate (``\\ud83d``): json.loads may turn it into a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _clean_arguments(raw: str, parsed: dict[str, object]) -> dict[str, object]:
    """``parsed`` with valid Unicode strings (checked only when ``raw`` could carry a surrogate)."""
    if is_clean(raw) and _SURROGATE_ESCAPE.search(raw) is None:
        return parsed
    cleaned: dict[str, object] = clean_json(parsed)
    return cleaned


def clean_body(data: JSONValue) -> JSONValue:
    """A provider's decoded answer, with valid Unicode text, or refused when too deep.

    JSON escapes may carry lone surrogates; see ``agentkit._text``.

    Raises:
        ModelResponseError: when the answer nests deeper than ``MAX_JSON_DEPTH`` levels.
    """
    try:
        cleaned: JSONValue = clean_json(data)
    except ValueError as exc:
        raise ModelResponseError(f"the model's answer is malformed: {exc}") from None
    return cleaned


def tool_use_block(call_id: str | None, name: str, raw: str, *, final: bool) -> ToolUseBlock:
    """Build a ``tool_use`` block from argument text.

    Args:
        call_id: The provider's call id (one is generated when missing).
        name: Tool name.
        raw: The arguments' JSON text so far.
        final: Whether the arguments are complete (complete empty text means ``{}``). While
            streaming, empty text is still "not yet an object" and keeps ``raw_input``.

    Returns:
        The block; with ``raw_input`` when the text is not (yet) a JSON object.
    """
    call_id = clean_text(call_id) if call_id else new_id("call_", 12)
    block = ToolUseBlock(type="tool_use", id=call_id, name=clean_text(name), input={})
    parsed = parse_arguments(raw) if (raw.strip() or final) else None
    if parsed is None:
        block["raw_input"] = clean_text(raw)
    else:
        block["input"] = _clean_arguments(raw, parsed)
    return block


def split_tool_results(
    blocks: list[ContentBlock],
) -> tuple[list[ContentBlock], list[ToolResultBlock]]:
    """Separate tool results from the other blocks of a message (order kept in each)."""
    others: list[ContentBlock] = []
    results: list[ToolResultBlock] = []
    for block in blocks:
        if block["type"] == "tool_result":
            results.append(block)
        else:
            others.append(block)
    return others, results


def result_text(result: ToolResultBlock) -> str:
    """The textual part of a tool result (the other parts travel separately)."""
    output = result["output"]
    if isinstance(output, str):
        return output
    return "\n".join(block["text"] for block in output if block["type"] == "text")


def apply_structured_output(
    response: ChatResponse, structured_model: type[BaseModel], raw: str | None
) -> None:
    """Validate ``raw`` (the answer's JSON) against ``structured_model``.

    On success ``metadata["structured_output"]`` holds the JSON-safe validated value; on
    failure ``metadata["structured_output_error"]`` holds the validation message, so the
    caller can ask the model again instead of crashing.
    """
    metadata = response.metadata if response.metadata is not None else {}
    response.metadata = metadata
    if raw is None:
        metadata["structured_output_error"] = "the model gave no structured answer"
        return
    from pydantic import ValidationError

    try:
        value = structured_model.model_validate_json(raw)
    except ValidationError as err:
        metadata["structured_output_error"] = str(err)
        return
    metadata["structured_output"] = value.model_dump(mode="json")


def require_extra(module: str, extra: str, purpose: str) -> None:
    """Raise ``MissingDependencyError`` naming the extra when ``module`` cannot be imported.

    Args:
        module: The module the SDK will import (``botocore``, ``google.auth``).
        extra: The agentkit extra that installs it (``bedrock``, ``vertex``).
        purpose: What needs it, for the message.
    """
    import importlib

    from agentkit.exceptions import MissingDependencyError

    try:
        importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(
            f"{purpose} needs {module!r}: pip install 'agentkit[{extra}]'", name=module
        ) from err


def json_schema_spec(model: type[BaseModel]) -> dict[str, object]:
    """An OpenAI ``json_schema`` spec (``name``, ``schema``, ``strict``) of a pydantic model.

    Strict when the schema allows it (see ``strict_schema``).
    """
    schema = model.model_json_schema()
    strict = strict_schema(schema)
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", model.__name__)[:64]
    spec: dict[str, object] = {
        "name": name,
        "schema": strict or schema,
        "strict": strict is not None,
    }
    if isinstance(schema.get("description"), str):
        spec["description"] = schema["description"]
    return spec


def strict_schema(schema: JSONObject) -> JSONObject | None:
    """A copy of ``schema`` usable with OpenAI strict mode, or None when it cannot be.

    Strict mode needs every object closed (``additionalProperties: false``) with all its
    properties required; a schema with optional fields (defaults) or open maps is sent
    non-strict rather than silently changing its meaning.
    """

    def walk(node: JSONValue) -> JSONValue:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "default" in node:
            raise _NotStrict
        out: JSONObject = {}
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                # name -> schema maps: walk the schemas, not the map itself
                out[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                out[key] = walk(value)
        if out.get("type") == "object":
            props = out.get("properties")
            extra = out.get("additionalProperties", False)
            if not isinstance(props, dict) or extra not in (False, None):
                raise _NotStrict
            required = out.get("required", [])
            if not isinstance(required, list) or set(map(str, required)) != set(props):
                raise _NotStrict
            out["additionalProperties"] = False
        return out

    try:
        result = walk(schema)
    except _NotStrict:
        return None
    return result if isinstance(result, dict) else None


_SCHEMA_MAPS = frozenset(("properties", "$defs", "definitions", "patternProperties"))

_UNSUPPORTED_SCHEMA_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minLength", "maxLength", "minItems", "maxItems"}
)
"""JSON-schema constraints constrained decoding does not take (pydantic checks them after)."""


def closed_schema(model: type[BaseModel]) -> dict[str, object]:
    """The JSON schema of ``model`` as Anthropic and Bedrock structured outputs take it.

    Every object is closed (``additionalProperties: false``, which both APIs require) and
    the numeric and length constraints they do not support are left out: the answer is
    validated against the full pydantic model afterwards, so nothing is lost.
    """

    def walk(node: object) -> object:
        if isinstance(node, list):
            return [walk(item) for item in node]
        return walk_object(node) if isinstance(node, dict) else node

    def walk_object(node: Mapping[str, object]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):  # names -> schemas
                out[key] = {name: walk(sub) for name, sub in value.items()}
            elif key not in _UNSUPPORTED_SCHEMA_KEYS:
                out[key] = walk(value)
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out

    return walk_object(model.model_json_schema())


class _NotStrict(Exception):
    """Internal: the schema cannot be made strict."""
