"""The model and the toolkit of a durable run: every request and every call is a DBOS step.

``DurableModel`` wraps a ``ChatModel``: inside a DBOS workflow each request runs as a step
whose recorded output is the answer as JSON, so on recovery a completed request is replayed
from the step log instead of being sent again. Right after a request returns (in workflow
code, a deterministic point), it reserves one step id per tool call of the answer, in the
order the model listed them (``DBOS.reserve_step``).

``DurableToolkit`` is a copy of a ``Toolkit`` (same tools, groups and limits) whose calls run
as steps at those reserved ids. So the step order of a turn's tool calls is the model's
order, whatever order parallel calls happen to start or finish in; a call without a
reservation (an id the loop had to rename) takes the next free id when it starts.

Outside a workflow both are transparent: they delegate to what they wrap.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypedDict

from agentkit.exceptions import StateError
from agentkit.messages import ContentBlock, ToolUseBlock
from agentkit.models._base import ChatModel, ChatResponse, ChatUsage, ModelRequest
from agentkit.tools import Toolkit, ToolResponse
from agentkit.tools._response import ToolResultContent

if TYPE_CHECKING:
    from dbos import DBOS, StepOptions, StepReservation

    from agentkit.tools._context import RunContext

__all__ = ["DurableModel", "DurableToolkit", "RunSteps", "idempotency_key"]

_CURRENT_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentkit_durable_call", default=None
)


def idempotency_key() -> str | None:
    """The idempotency key of the tool call running now in a durable run, else None.

    ``"<workflow id>/<tool call id>"``: the same on every execution of the same call (the
    call id comes from the recorded model answer), different for every other call. A tool
    with side effects outside agentkit passes it to the service it calls (a payment API's
    ``Idempotency-Key`` header, a unique column...), so the one execution that may be
    repeated after a crash (see docs/scaling.md) has no second effect.
    """
    return _CURRENT_CALL.get()


@contextlib.contextmanager
def keyed_call(key: str) -> Iterator[None]:
    """Run a call of a durable run under ``key`` (what :func:`idempotency_key` returns)."""
    token = _CURRENT_CALL.set(key)
    try:
        yield
    finally:
        _CURRENT_CALL.reset(token)


def _dbos() -> type[DBOS]:
    from dbos import DBOS

    return DBOS


def in_workflow() -> bool:
    """Whether the caller runs in DBOS workflow code (not inside a step)."""
    dbos = _dbos()
    return dbos.workflow_id is not None and dbos.step_id is None


class RunSteps:
    """Per-run bookkeeping shared by a run's model and toolkit: reserved tool-call steps.

    Also the run's first corrupt record, if any: a tool call's error is handed to the model
    as the call's result by the agent loop, so a tool step whose record does not decode is
    kept here too, and the run's next model request (or its end) raises it instead.
    """

    def __init__(self, workflow_id: str = "") -> None:
        self.workflow_id = workflow_id
        self.reserved: dict[str, StepReservation] = {}
        self.model_requests = 0
        self.tool_calls = 0
        self.corrupt: StateError | None = None

    def corrupt_record(self, step: str, exc: BaseException) -> StateError:
        """The error for a recorded step output that does not decode (kept, see above)."""
        error = StateError(
            f"the recorded output of step {step!r} of durable run {self.workflow_id!r} does "
            f"not decode (a corrupt DBOS record): {exc!r}. The run fails rather than continue "
            "from it; fork it from before that step, or start it again"
        )
        if self.corrupt is None:
            self.corrupt = error
        return error

    def raise_corrupt(self) -> None:
        """Raise the run's corrupt record, if it met one."""
        if self.corrupt is not None:
            raise self.corrupt

    def reserve(self, response: ChatResponse) -> None:
        """Reserve one step id per tool call of ``response``, in the model's order."""
        dbos = _dbos()
        for block in response.content:
            if block["type"] == "tool_use" and block["id"] not in self.reserved:
                self.reserved[block["id"]] = dbos.reserve_step()


class _ResponseRecord(TypedDict):
    """A model answer as its step records it (JSON)."""

    content: list[ContentBlock]
    usage: dict[str, Any] | None  # ChatUsage.to_dict()
    id: str
    metadata: dict[str, object] | None


class _ToolRecord(TypedDict):
    """A tool call's final result as its step records it (JSON)."""

    content: list[ToolResultContent]
    metadata: dict[str, object] | None
    is_error: bool
    is_interrupted: bool


def _response_to_json(response: ChatResponse) -> _ResponseRecord:
    data = {
        "content": list(response.content),
        "usage": None if response.usage is None else response.usage.to_dict(),
        "id": response.id,
        "metadata": response.metadata,
    }
    # JSON only, never pickle: what cannot round-trip through JSON is refused here.
    loaded: _ResponseRecord = json.loads(json.dumps(data, allow_nan=False))
    return loaded


_DECODE_ERRORS = (KeyError, TypeError, ValueError, AttributeError)
"""What a record that is not the shape its step wrote raises when it is read."""


def _response_from_json(data: _ResponseRecord) -> ChatResponse:
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise TypeError(f"not a model answer: {str(data)[:200]!r}")
    usage = data.get("usage")
    return ChatResponse(
        content=list(data["content"]),
        usage=None if usage is None else ChatUsage(**usage),
        id=str(data["id"]),
        metadata=data.get("metadata"),
    )


class DurableModel(ChatModel):
    """A ``ChatModel`` whose requests are DBOS steps inside a workflow (see module docs).

    A streaming model is read to its end inside the step: a durable run gets the complete
    answer at once (the step log records answers, not chunks).

    Args:
        inner: The model to call.
        steps: The run's bookkeeping (tool-call reservations).
    """

    offline = True
    """The wrapped model checks ``block_model_requests`` itself; a replay sends nothing."""

    def __init__(self, inner: ChatModel, steps: RunSteps) -> None:
        super().__init__(inner.model_name, stream=False)
        self.inner = inner
        self.steps = steps
        self.provider = inner.provider

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """Send the request as a step (or replay its recorded answer)."""
        if not in_workflow():
            return await self.inner.request(request)
        self.steps.raise_corrupt()  # never send a request built on a corrupt record
        self.steps.model_requests += 1
        sent = False

        async def send() -> _ResponseRecord:
            nonlocal sent
            sent = True
            return _response_to_json(await self.inner.request(request))

        name = f"model:{self.model_name}"
        try:
            response = _response_from_json(await _dbos().run_step_async({"name": name}, send))
        except _DECODE_ERRORS as exc:
            if sent:  # the model itself failed now: not a record
                raise
            raise self.steps.corrupt_record(name, exc) from exc
        self.steps.reserve(response)
        return response

    async def aclose(self) -> None:
        """Nothing to close: the wrapped model belongs to the template agent."""


def _tool_response_to_json(response: ToolResponse) -> _ToolRecord:
    data = {
        "content": list(response.content),
        "metadata": response.metadata,
        "is_error": response.is_error,
        "is_interrupted": response.is_interrupted,
    }
    loaded: _ToolRecord = json.loads(json.dumps(data, allow_nan=False))
    return loaded


class DurableToolkit(Toolkit):
    """A copy of ``toolkit`` whose calls are DBOS steps inside a workflow (see module docs).

    The tools themselves are shared with the original (they are not copied); groups and
    their activation are copied, so a run that switches groups does not touch the template;
    so are its tool sources (each follows this toolkit) and its ``tainted_by``.
    Progress chunks of a call are not replayed: a durable call yields its final chunk only.
    """

    def __init__(self, toolkit: Toolkit, steps: RunSteps) -> None:
        super().__init__(
            max_output_chars=toolkit.max_output_chars, default_timeout=toolkit.default_timeout
        )
        self.steps = steps
        for group in toolkit.groups.values():
            if group.name not in self.groups:
                self.create_tool_group(group.name, group.description, group.active, group.notes)
            else:
                self.groups[group.name].active = group.active
        for tool in toolkit.tools.values():
            self.register_tool(tool)
        for source in toolkit.tool_sources:  # MCP servers refresh it, its state saves pins
            self.add_tool_source(source.follow(self))
        self.tainted_by = toolkit.tainted_by  # immutable: shared

    def call_tool_function(
        self,
        block: ToolUseBlock,
        *,
        context: object = None,
        run: RunContext[object] | None = None,
        approved: bool = False,
    ) -> AsyncGenerator[ToolResponse, None]:
        """Run the call as a step at its reserved id (or replay its recorded result)."""
        if not in_workflow():
            return super().call_tool_function(block, context=context, run=run, approved=approved)
        return self._durable_call(block, context, run, approved)

    async def _durable_call(
        self, block: ToolUseBlock, context: object, run: RunContext[object] | None, approved: bool
    ) -> AsyncGenerator[ToolResponse, None]:
        dbos = _dbos()
        key = f"{dbos.workflow_id}/{block['id']}"
        base = super().call_tool_function

        ran = False

        async def call() -> _ToolRecord:
            nonlocal ran
            ran = True
            token = _CURRENT_CALL.set(key)
            final = ToolResponse.error("The tool produced no result.")
            try:
                chunks = base(block, context=context, run=run, approved=approved)
                async with aclosing(chunks):
                    async for chunk in chunks:
                        final = chunk
            finally:
                _CURRENT_CALL.reset(token)
            return _tool_response_to_json(final)

        step_name = f"tool:{block['name']}"
        options: StepOptions = {"name": step_name}
        self.steps.tool_calls += 1
        reservation = self.steps.reserved.pop(block["id"], None)
        try:
            if reservation is not None:
                data = await reservation.run_async(options, call)
            else:
                data = await dbos.run_step_async(options, call)
            response = _tool_response_from_json(data)
        except _DECODE_ERRORS as exc:
            if ran:
                raise
            raise self.steps.corrupt_record(step_name, exc) from exc
        yield response


def _tool_response_from_json(data: _ToolRecord) -> ToolResponse:
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise TypeError(f"not a tool result: {str(data)[:200]!r}")
    return ToolResponse(
        content=data["content"],
        metadata=data.get("metadata"),
        is_error=bool(data.get("is_error")),
        is_interrupted=bool(data.get("is_interrupted")),
    )
