"""Output validators: ``@agent.output_validator`` functions that check the final answer.

A validator receives the run's ``RunContext`` and the answer (the validated ``output_type``
instance, or the final text of a text run) and returns the answer to use (itself, or a
corrected one). It may be sync or async. Raising ``ToolRetry("...")`` rejects the answer:
the model is told the message and answers again. Rejections share the structured-output
retry budget (``MAX_STRUCTURED_RETRIES`` per run); past it the run raises
``StructuredOutputError``, for text runs too.

The validators of an agent run in the order they were registered, each on the previous
one's answer; ``agent.copy()`` keeps them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

from agentkit.agent._state import store
from agentkit.agent._structured import MAX_STRUCTURED_RETRIES
from agentkit.exceptions import StructuredOutputError, ToolRetry, UsageError
from agentkit.messages import ContentBlock, Msg, TextBlock

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentkit.agent._conversation import Conversation
    from agentkit.agent._setup import RunSetup
    from agentkit.agent._state import Run
    from agentkit.tools._context import RunContext

__all__ = ["OutputValidator", "ValidatorT", "accept_text", "validate_output", "validate_text"]

OutputValidator: TypeAlias = Callable[["RunContext[Any]", Any], object]
"""``(ctx, output) -> output``, sync or async; raises ``ToolRetry`` to have the model retry.

Its answer is checked when it runs (an output of the same kind, or an awaitable of one)."""

ValidatorT = TypeVar("ValidatorT", bound=OutputValidator)
"""A validator function, returned unchanged by ``@agent.output_validator``."""

RETRY_TEXT = "Your answer was rejected: {message}\nAnswer again, correcting this."
JSON_RETRY_TEXT = "{message}\nAnswer again with only the corrected JSON object."


@overload
async def validate_output(setup: RunSetup, value: str) -> tuple[str, str | None]: ...
@overload
async def validate_output(setup: RunSetup, value: BaseModel) -> tuple[BaseModel, str | None]: ...
async def validate_output(
    setup: RunSetup, value: str | BaseModel
) -> tuple[str | BaseModel, str | None]:
    """Run the agent's validators on ``value``.

    Returns:
        The answer the validators left, and None; or the original answer and the
        ``ToolRetry`` message of the validator that rejected it.
    """
    from pydantic import BaseModel

    expected: type[BaseModel] | type[str] = BaseModel if isinstance(value, BaseModel) else str
    for validator in setup.output_validators:
        try:
            out = validator(setup.context, value)
            if inspect.isawaitable(out):
                out = await out
        except ToolRetry as exc:
            return value, exc.message
        if not isinstance(out, expected):
            name = getattr(validator, "__name__", repr(validator))
            raise UsageError(
                f"output validator {name} must return the output "
                f"({expected.__name__}), got {type(out).__name__}"
            )
        value = out
    return value, None


async def validate_text(setup: RunSetup, conv: Conversation, run: Run, answer: Msg) -> Msg | None:
    """Validate the final text ``answer`` of a text run.

    Returns:
        The answer to finish with (its text replaced when a validator changed it), or None
        when a validator rejected it: the retry message is then stored as a user message
        for the next request.

    Raises:
        StructuredOutputError: when the answers were rejected more often than the budget.
    """
    text = answer.get_text()
    value, retry = await validate_output(setup, text)
    if retry is None:
        if value == text:
            return answer
        content: list[ContentBlock] = [TextBlock(type="text", text=value)]
        return Msg(answer.name, content, "assistant", answer.metadata, id=answer.id)
    run.output.failures += 1
    if run.output.failures > MAX_STRUCTURED_RETRIES:
        raise StructuredOutputError(
            f"the output validators rejected the answer {run.output.failures} times "
            f"(more than the {MAX_STRUCTURED_RETRIES} retries allowed): {retry}"
        )
    note = Msg("user", RETRY_TEXT.format(message=retry), "user", {"output_retry": True})
    await store(conv.memory, note, run)
    return None


async def accept_text(
    setup: RunSetup, conv: Conversation, run: Run, answer: Msg, *, last: bool = False
) -> bool:
    """Accept the JSON text ``answer`` of a native or prompted run as its output.

    The text is parsed and validated against the output model, then the agent's output
    validators run on it. An accepted answer is left in ``run.output.value`` and
    ``run.output.data``. A refused one counts against the structured-output retry
    budget, and the reason is stored as a user message for the next request (not when
    ``last``: no request follows).

    Returns:
        Whether the answer was accepted.

    Raises:
        StructuredOutputError: when answers were refused more often than the budget.
    """
    assert run.output.plan is not None
    value, error = run.output.plan.parse_answer(answer.get_text())
    if value is not None and setup.output_validators:
        value, retry = await validate_output(setup, value)
        if retry is not None:
            value, error = None, RETRY_TEXT.format(message=retry)
    if value is not None:
        run.output.value = value
        run.output.data = value.model_dump(mode="json")
        return True
    run.output.failures += 1
    if run.output.failures > MAX_STRUCTURED_RETRIES:
        raise StructuredOutputError(
            f"the model failed to produce a valid {run.output.plan.name} "
            f"after {MAX_STRUCTURED_RETRIES} retries: {error}"
        )
    if not last:
        note = Msg("user", JSON_RETRY_TEXT.format(message=error), "user", {"output_retry": True})
        await store(conv.memory, note, run)
    return False
