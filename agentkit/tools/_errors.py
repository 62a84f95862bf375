"""Error results: each tells the model what went wrong and how to fix its call.

Every error response built here has ``is_error=True``, ``is_last=True`` and
``metadata["error"]`` set to a stable kind (for UIs, logs and tests):
``unknown_tool``, ``inactive_group``, ``invalid_json``, ``invalid_arguments``,
``tool_error``, ``timeout``, ``interrupted``, ``retry`` (the tool raised ``ToolRetry``),
``approval_required`` (the tool raised ``ApprovalRequired``; an agent turns the call into
a pending approval).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from agentkit.messages import TextBlock
from agentkit.tools._response import ToolResponse, ToolResultContent

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

__all__ = [
    "INTERRUPTED_TEXT",
    "ArgumentsError",
    "interrupted_response",
]

INTERRUPTED_TEXT = "Tool call interrupted by the user before it finished."
_MAX_LISTED = 30
_MAX_SCHEMA_ERRORS = 5


class ArgumentsError(ValueError):
    """Arguments passed schema validation but could not be converted to the tool's types.

    A ``Tool`` raises it from ``invoke`` to have the call answered as invalid arguments
    rather than as a failure of the tool.
    """


def _error(kind: str, text: str, content: Sequence[ToolResultContent] = ()) -> ToolResponse:
    blocks = [*content, TextBlock(type="text", text=text)]
    return ToolResponse(content=blocks, metadata={"error": kind}, is_error=True)


def interrupted_response(
    name: str, content: Sequence[ToolResultContent] = (), text: str = INTERRUPTED_TEXT
) -> ToolResponse:
    """The final result of a call cut short by an interrupt (the agent records it).

    Args:
        name: The tool's name (kept in ``metadata["tool"]``).
        content: Output the tool produced before it was interrupted, kept before the note.
        text: The note for the model.
    """
    response = _error("interrupted", text, content)
    response.is_interrupted = True
    assert response.metadata is not None
    response.metadata["tool"] = name
    return response


def unknown_tool(name: str, available: Iterable[str]) -> ToolResponse:
    """The model called a tool that does not exist (or is not active)."""
    names = sorted(available)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    text = f"Error: there is no tool named {name!r}."
    if close:
        text += " Did you mean " + " or ".join(repr(c) for c in close) + "?"
    if names:
        listed = ", ".join(names[:_MAX_LISTED]) + (", ..." if len(names) > _MAX_LISTED else "")
        text += f" Available tools: {listed}. Call one of them by its exact name."
    else:
        text += " No tools are available now; answer without tools."
    return _error("unknown_tool", text)


def inactive_group(name: str, group: str, meta_tool: str | None) -> ToolResponse:
    """The tool exists but its group is not active."""
    text = f"Error: the tool {name!r} belongs to the tool group {group!r}, which is not active."
    if meta_tool:
        text += f" Activate the group first by calling {meta_tool!r}, then call the tool again."
    else:
        text += " Use one of the tools you were given instead."
    return _error("inactive_group", text)


def invalid_json(name: str, raw: str | None, detail: str | None) -> ToolResponse:
    """The arguments are not a JSON object."""
    text = f"Error: the arguments for the tool {name!r} are not a valid JSON object"
    if detail:
        text += f" ({detail})"
    if raw is not None:
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        text += f"; received: {shown!r}"
    text += ". Call the tool again with its arguments as one JSON object matching its schema."
    return _error("invalid_json", text)


def _path(error: ValidationError) -> str:
    return error.json_path


def _describe_schema_error(error: ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        allowed = schema.get("properties", {})
        extra = sorted(k for k in error.instance if k not in allowed)
        return (
            f"{_path(error)}: unexpected argument(s) {', '.join(map(repr, extra))}; "
            f"allowed: {', '.join(map(repr, allowed)) or 'none'}"
        )
    return f"{_path(error)}: {error.message}"


def invalid_arguments(
    name: str, errors: Sequence[ValidationError], parameters: dict[str, object]
) -> ToolResponse:
    """The arguments do not match the tool's schema (jsonschema errors with JSON paths)."""
    lines = [_describe_schema_error(e) for e in errors[:_MAX_SCHEMA_ERRORS]]
    if len(errors) > _MAX_SCHEMA_ERRORS:
        lines.append(f"... and {len(errors) - _MAX_SCHEMA_ERRORS} more")
    text = (
        f"Error: invalid arguments for the tool {name!r}:\n- "
        + "\n- ".join(lines)
        + f"\nExpected arguments: {signature_hint(parameters)}. "
        "Fix the arguments and call the tool again."
    )
    return _error("invalid_arguments", text)


def unconvertible_arguments(name: str, detail: str, parameters: dict[str, object]) -> ToolResponse:
    """The arguments matched the schema but the tool's own type checks refused them."""
    text = (
        f"Error: invalid arguments for the tool {name!r}: {detail}\n"
        f"Expected arguments: {signature_hint(parameters)}. "
        "Fix the arguments and call the tool again."
    )
    return _error("invalid_arguments", text)


def signature_hint(parameters: dict[str, object]) -> str:
    """A compact reminder of the expected arguments: ``query: string, limit?: integer``."""
    props = parameters.get("properties") or {}
    if not isinstance(props, dict) or not props:
        return "none ({})"
    listed = parameters.get("required") or ()
    required = set(listed) if isinstance(listed, list | tuple) else set()
    parts = []
    for key, schema in props.items():
        mark = "" if key in required else "?"
        parts.append(f"{key}{mark}: {_type_hint(schema)}")
    return ", ".join(parts)


def _type_hint(schema: object) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"][:8])
    if "const" in schema:
        return repr(schema["const"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf") or []
        return " | ".join(_type_hint(s) for s in options)
    kind = schema.get("type", "any")
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type_hint(schema['items'])}"
    return kind if isinstance(kind, str) else " | ".join(kind)


def tool_failed(
    name: str, exc: BaseException, content: Sequence[ToolResultContent] = ()
) -> ToolResponse:
    """The tool raised (before or while streaming ``content``)."""
    exc = _leaf(exc)
    message = str(exc).strip() or "(no message)"
    where = " while streaming its output" if content else ""
    text = (
        f"Error: the tool {name!r} failed{where} with {type(exc).__name__}: {message}"
        f"\n{_failure_hint(exc)}"
    )
    return _error("tool_error", ("\n\n" if content else "") + text, content)


_ARGUMENT_ERRORS = (ValueError, TypeError, LookupError)
_CONNECTION_HINT = (
    "The tool's server or connection is unavailable: this is not caused by your arguments. "
    "Calling it again later may work; otherwise try another approach or tell the user."
)


def _failure_hint(exc: BaseException) -> str:
    """What the model can do about ``exc``: only blame the arguments when they may be at fault.

    A lost connection, a server that is down or a timeout inside the tool says nothing about
    the call; telling the model to "check the arguments" then makes it retry the same call
    with mangled arguments.
    """
    import anyio

    from agentkit.exceptions import MCPConnectionError, ModelError

    lost = (MCPConnectionError, ConnectionError, EOFError)
    if isinstance(exc, (*lost, anyio.BrokenResourceError, anyio.ClosedResourceError)):
        return _CONNECTION_HINT
    if isinstance(exc, TimeoutError):
        return (
            "An operation inside the tool timed out: this is not caused by your arguments. "
            "Calling it again may work; otherwise try another approach."
        )
    if isinstance(exc, PermissionError):
        return "The tool was denied access; do not retry the same call, try another approach."
    if (
        type(exc).__module__.split(".")[0] in ("httpx", "httpx2")
        and "Status" not in type(exc).__name__
    ):  # transport errors (connect, read, protocol); a bad status is the call's
        return _CONNECTION_HINT
    if isinstance(exc, ModelError):
        return "A model the tool uses failed: this is not caused by your arguments."
    if isinstance(exc, _ARGUMENT_ERRORS):
        return "Check the arguments; if the error is not caused by them, try another approach."
    return (
        "If the arguments caused it, fix them and call the tool again; "
        "otherwise try another approach."
    )


def _leaf(exc: BaseException) -> BaseException:
    # A single failure wrapped in a task group's ExceptionGroup: report the failure itself.
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def timed_out(name: str, timeout: float, content: Sequence[ToolResultContent] = ()) -> ToolResponse:
    """The tool ran longer than its timeout and was stopped."""
    text = (
        f"Error: the tool {name!r} timed out after {timeout:g} s and was stopped. "
        "Try a smaller or simpler request, or another approach."
    )
    return _error("timeout", ("\n\n" if content else "") + text, content)


def bad_tool_schema(name: str, detail: str) -> ToolResponse:
    """The tool's own parameters schema is not valid JSON Schema (a bug in the tool)."""
    text = (
        f"Error: the tool {name!r} cannot be called: its parameters schema is invalid "
        f"({detail}). This is a problem with the tool, not your call; use another tool."
    )
    return _error("tool_error", text)


def retry(name: str, message: str) -> ToolResponse:
    """The tool raised ``ToolRetry(message)``: the model should call it again, differently."""
    response = _error("retry", message or f"Call {name!r} again with different arguments.")
    assert response.metadata is not None
    response.metadata["tool"] = name
    return response


def approval_required(name: str, reason: str) -> ToolResponse:
    """The tool raised ``ApprovalRequired``: the call must wait for a human's approval."""
    text = f"The tool {name!r} needs a human's approval before it can run."
    response = _error("approval_required", text + (f" ({reason})" if reason else ""))
    assert response.metadata is not None
    response.metadata["reason"] = reason
    return response
