"""Structured output: response tools offered for one reply, validated with pydantic.

For one pydantic model the model is offered one extra tool, ``generate_response``, whose
schema is the model's JSON schema. For a union (``output_type=A | B``) it is offered one
response tool per member, ``generate_response_A`` and ``generate_response_B``: the tool the
model calls names the member, so validation never has to guess which member arguments that
would fit several were meant for, and every tool's parameters stay a flat JSON object (what
every provider accepts, OpenAI's strict mode included), described by its member's
docstring.

The tools are merged into the schema list at call time (the user's Toolkit is never
touched). An invalid call is answered with an error result carrying the validation
message, so the model can correct itself, up to ``MAX_STRUCTURED_RETRIES`` times.

Output modes: a bare model (or union) and ``ToolOutput(M)`` use the response tools above.
``NativeOutput(M)`` asks the provider for JSON matching the schema (OpenAI ``json_schema``,
Anthropic ``output_config.format``) and ``PromptedOutput(M)`` puts the schema in the
instructions; both read the answer from the reply's text, and an answer that is not valid
JSON for ``M`` is sent back to the model with the error, within the same retry budget.
What a run asks for is one immutable value, an :class:`OutputPlan` built from the
``output_type`` (:func:`output_plan`): the models, the response tools, the mode and the
fallback. The run holds it and passes it along; no class is generated and nothing is
registered at module level, so a union built at runtime leaves nothing behind.
"""

from __future__ import annotations

import json
import re
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeGuard, TypeVar

from agentkit.exceptions import UsageError
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.messages import ToolUseBlock
    from agentkit.models._base import ChatModel, ChatResponse, OutputSpec, ToolDefinition

__all__ = [
    "MAX_STRUCTURED_RETRIES",
    "RESPONSE_TOOL",
    "ModeOutput",
    "NativeOutput",
    "OutputMode",
    "OutputPlan",
    "PromptedOutput",
    "ToolOutput",
    "output_plan",
]

OutputMode: TypeAlias = Literal["tool", "native", "prompted"]
"""How a structured answer is asked for: a response tool, the provider's JSON-schema
mode, or the schema in the instructions."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolOutput(Generic[T]):
    """Ask for the answer as the arguments of a response tool (the default mode).

    ``output_type=ToolOutput(M)`` is ``output_type=M``, said explicitly. Works with every
    adapter that has tools, unions (``ToolOutput(A | B)``) included.

    Attributes:
        output_type: A pydantic model class, or a union of them.
    """

    output_type: type[T] | Any


@dataclass(frozen=True, slots=True)
class NativeOutput(Generic[T]):
    """Ask the provider itself for JSON matching the schema (its structured-output mode).

    OpenAI Chat Completions ``response_format={"type": "json_schema", ...}``, OpenAI
    Responses ``text.format``, Anthropic ``output_config.format``, Gemini
    ``responseJsonSchema``, Bedrock Converse ``outputConfig.textFormat``. An adapter without
    such a mode raises ``UsageError`` unless ``fallback`` names a mode to use instead.

    Attributes:
        output_type: A pydantic model class.
        fallback: ``"tool"`` or ``"prompted"``: the mode to use with a model that has no
            native mode (None: refuse).
    """

    output_type: type[T]
    fallback: Literal["tool", "prompted"] | None = None


@dataclass(frozen=True, slots=True)
class PromptedOutput(Generic[T]):
    """Put the schema in the instructions and read the answer as JSON from the reply text.

    For models with neither tools nor a native JSON mode; an answer that is not valid
    JSON for the model is sent back with the error, and the model answers again.

    Attributes:
        output_type: A pydantic model class.
    """

    output_type: type[T]


RESPONSE_TOOL = "generate_response"
MAX_STRUCTURED_RETRIES = 3

ModeOutput: TypeAlias = ToolOutput[T] | NativeOutput[T] | PromptedOutput[T]
"""An ``output_type`` that names its mode (``RunResult[T]`` for any of them)."""


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """How a run asks for its structured answer and reads it: one immutable value.

    Built from an ``output_type`` by :func:`output_plan` (once per agent, or per run for
    ``run(..., output_type=...)``), held by the run and passed to whatever needs it.
    Nothing is cached anywhere else: a union built at runtime lives as long as its plan.

    Attributes:
        output_type: The ``output_type`` as given (a model, a union, ``NativeOutput(M)``...):
            what a ``pre_reply`` hook sees and what a handoff's target is asked for.
        tools: The response tools and the model each one answers with, in order: one
            ``generate_response`` for a model, ``generate_response_<Member>`` per member of
            a union (the tool the model calls names the member).
        mode: How the answer is asked for (see ``OutputMode``).
        fallback: ``NativeOutput``'s mode for a chat model without a native mode.
    """

    output_type: object
    tools: tuple[tuple[str, type[BaseModel]], ...]
    mode: OutputMode = "tool"
    fallback: Literal["tool", "prompted"] | None = None

    @property
    def is_union(self) -> bool:
        """Whether the answer is one of several models (a response tool per member)."""
        return len(self.tools) > 1

    @property
    def model(self) -> type[BaseModel]:
        """The model the answer must match (a union's first member)."""
        return self.tools[0][1]

    @property
    def members(self) -> tuple[type[BaseModel], ...]:
        """Every model the answer may match, in order."""
        return tuple(model for _, model in self.tools)

    @property
    def name(self) -> str:
        """The answer's type as people read it: ``Weather``, ``Refund | Escalation``."""
        return " | ".join(model.__name__ for model in self.members)

    def qualname(self) -> str:
        """The ``module.qualname`` of each member (a saved state names the paused type)."""
        return " | ".join(f"{m.__module__}.{m.__qualname__}" for m in self.members)

    def mode_for(self, chat_model: ChatModel) -> OutputMode:
        """The mode used with ``chat_model``: ``NativeOutput``'s fallback where it has none.

        Raises:
            UsageError: for ``NativeOutput`` without a fallback on a model with no native
                mode.
        """
        if self.mode != "native" or chat_model.native_output:
            return self.mode
        if self.fallback is not None:
            return self.fallback
        raise UsageError(
            f"NativeOutput({self.name}) asks for the provider's native structured output "
            f"(mode 'native'), which {type(chat_model).__name__} ({chat_model.model_name!r}) "
            "cannot give; use ToolOutput or PromptedOutput, or "
            "NativeOutput(..., fallback='tool')"
        )

    def prompt_instructions(self) -> str:
        """The instructions of ``PromptedOutput``: answer with JSON matching the schema."""
        schema = self.model.model_json_schema()
        return (
            "Give your final answer as one JSON object matching this JSON schema, and "
            "nothing else: no text before or after it, no code fence.\n"
            + json.dumps(schema, ensure_ascii=False)
        )

    def parse_answer(self, text: str) -> tuple[BaseModel | None, str]:
        """Read a text-mode answer: the JSON object in ``text``, validated against the model.

        A code fence or words around the object are tolerated (prompted answers have them).

        Returns:
            The validated instance and "", or None and the message telling the model what
            was wrong.
        """
        from pydantic import ValidationError

        start = text.find("{")
        if start < 0:
            return None, "Your answer is not a JSON object."
        try:
            data, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError as exc:
            return None, f"Your answer is not valid JSON: {exc}."
        try:
            return self.model.model_validate(data), ""
        except ValidationError as exc:
            return None, f"Your answer does not match the required schema:\n{exc}"

    def validate(self, data: object) -> BaseModel:
        """``data`` (an answer's JSON form) as the first member it is valid for.

        Raises:
            pydantic.ValidationError: when no member accepts it (the last member's error).
        """
        from pydantic import ValidationError

        *first, last = self.members
        for member in first:
            try:
                return member.model_validate(data)
            except ValidationError:
                continue
        return last.model_validate(data)

    def partial_source(
        self, mode: OutputMode
    ) -> typing.Callable[[ChatResponse], tuple[type[BaseModel], object] | None]:
        """How to find the structured answer in a streamed chunk, for ``PartialTracker``.

        Tool mode: the first call of a response tool (its member, for a union), its JSON
        arguments so far; text modes: the reply's text.
        """
        if mode != "tool":
            target = self.model

            def text(chunk: ChatResponse) -> tuple[type[BaseModel], object] | None:
                value = chunk.get_text()
                return (target, value) if value else None

            return text
        tools = dict(self.tools)

        def call(chunk: ChatResponse) -> tuple[type[BaseModel], object] | None:
            for block in chunk.content:
                if block["type"] == "tool_use" and block["name"] in tools:
                    raw = block["raw_input"] if "raw_input" in block else block["input"]
                    return tools[block["name"]], raw
            return None

        return call

    def is_response(self, name: str) -> bool:
        """Whether ``name`` is one of the response tools."""
        return any(tool == name for tool, _ in self.tools)

    def forced_choice(self) -> str:
        """The ``tool_choice`` that makes the model answer with a response tool."""
        return "required" if self.is_union else RESPONSE_TOOL

    def request_spec(self, mode: OutputMode) -> OutputSpec:
        """What one model request says it asks for (``ModelRequest.output``)."""
        from agentkit.models._base import OutputSpec

        return OutputSpec(self.model, mode, self.members if self.is_union else ())

    def response_definitions(self) -> list[ToolDefinition]:
        """The provider-neutral definitions of the response tools."""
        from agentkit.models._base import ToolDefinition

        definitions = []
        for name, member in self.tools:
            parameters = member.model_json_schema()
            parameters.pop("title", None)
            doc = (member.__doc__ or "").strip() or f"The final answer as {member.__name__}."
            if name != RESPONSE_TOOL:
                doc = f"Use this function if the answer is a {member.__name__}. {doc}"
            definitions.append(
                ToolDefinition(
                    name,
                    "Give your final answer by calling this function with arguments matching "
                    f"its schema. {doc}",
                    parameters,
                )
            )
        return definitions

    def validate_response(self, call: ToolUseBlock) -> tuple[ToolResponse, BaseModel | None]:
        """Validate a call of a response tool (against the member that tool names).

        Returns:
            The tool result to store, and the validated instance (None when invalid).
        """
        from pydantic import ValidationError

        member = dict(self.tools).get(call["name"], self.model)
        try:
            value = member.model_validate(call["input"])
        except ValidationError as exc:
            return (
                ToolResponse.error(
                    f"The arguments do not match the required schema:\n{exc}\n"
                    f"Call {call['name']} again with corrected arguments."
                ),
                None,
            )
        return ToolResponse.text("The structured response was accepted."), value


def _is_union(output_type: object) -> bool:
    return typing.get_origin(output_type) in (typing.Union, types.UnionType)


def output_plan(output_type: object) -> OutputPlan | None:
    """The plan of an ``output_type`` (None or ``str``: a plain-text answer).

    Raises:
        UsageError: for anything but a pydantic model class, a union of them (``A | B``,
            ``Union[A, B]``), ``str``, or ``ToolOutput``/``NativeOutput``/``PromptedOutput``
            of one (a text mode takes one model).
    """
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, NativeOutput | PromptedOutput):
        kind = type(output_type).__name__
        target = output_type.output_type
        if not _is_model(target):
            raise UsageError(
                f"{kind} takes one pydantic model class, got {target!r} "
                "(a union is answered through response tools: use ToolOutput(A | B))"
            )
        if isinstance(output_type, NativeOutput):
            tools = ((RESPONSE_TOOL, target),)
            return OutputPlan(output_type, tools, "native", output_type.fallback)
        return OutputPlan(output_type, ((RESPONSE_TOOL, target),), "prompted")
    given = output_type
    if isinstance(output_type, ToolOutput):
        output_type = output_type.output_type
    if _is_model(output_type):
        return OutputPlan(given, ((RESPONSE_TOOL, output_type),))
    if not _is_union(output_type):
        raise UsageError(
            "output_type must be a pydantic model class, a union of them (A | B) or str, "
            f"got {output_type!r}"
        )
    members = typing.get_args(output_type)
    for member in members:
        if not _is_model(member):
            raise UsageError(
                f"every member of a union output_type must be a pydantic model class; "
                f"{output_type!r} has {member!r}"
            )
    return OutputPlan(given, tuple(zip(_tool_names(members), members, strict=True)))


def _is_model(value: object) -> TypeGuard[type[BaseModel]]:
    from pydantic import BaseModel  # only for structured runs: pydantic is not cheap

    return isinstance(value, type) and issubclass(value, BaseModel)


def _tool_names(members: tuple[type[BaseModel], ...]) -> tuple[str, ...]:
    names: list[str] = []
    for member in members:
        base = f"{RESPONSE_TOOL}_{re.sub(r'[^A-Za-z0-9_-]', '_', member.__name__)}"[:60]
        name, n = base, 2
        while name in names:  # two members of the same name (from different modules)
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return tuple(names)
