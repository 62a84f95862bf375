"""``UserAgent``: a human in the conversation, behind the same interface as an agent.

``await user(msg)`` shows ``msg`` and returns what the human typed as a user ``Msg``, so a
human can take a turn in a pipeline or a ``MsgHub`` like any agent. Input comes from the
console by default (a ``prompt_toolkit`` prompt on the event loop, cancellable, so the
loop keeps running while the human thinks) or from any sync or async
``input_fn(prompt) -> str`` (a web form, a chat widget, a test script).

Structured input: with ``output_type`` (a pydantic model), the human answers with one
JSON object (an empty line means ``{}``, accepting the defaults); an invalid answer is
explained and asked again, up to ``max_attempts`` times.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import anyio.to_thread

from agentkit._console import console_input
from agentkit.agent._hooks import HookHost, HookRegistry
from agentkit.agent._printer import printed_on_console
from agentkit.exceptions import AgentBusyError, UsageError
from agentkit.messages import Msg, MsgInput

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["InputFn", "OutputFn", "UserAgent"]

InputFn: TypeAlias = Callable[[str], str | Awaitable[str]]
"""Reads one answer: called with the prompt, returns the human's text (sync or async)."""
OutputFn: TypeAlias = Callable[[str], object]
"""Shows one line of text to the human (``print`` by default)."""


def _render(msg: Msg) -> str:
    """One message as console text; non-text blocks become ``[image]``-style markers."""
    parts: list[str] = []
    for block in msg.get_content_blocks():
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_use":
            parts.append(f"[tool call {block['name']}]")
        elif block["type"] != "thinking":
            parts.append(f"[{block['type']}]")
    return f"{msg.name}: " + "\n".join(parts)


def describe_fields(model: type[BaseModel]) -> str:
    """A one-line description of the fields a structured answer needs."""
    fields = []
    for name, info in model.model_fields.items():
        annotation = getattr(info.annotation, "__name__", None) or str(info.annotation)
        extra = "required" if info.is_required() else f"default {info.get_default()!r}"
        fields.append(f"{name} ({annotation}, {extra})")
    return ", ".join(fields)


class UserAgent(HookHost):
    """A human participant: shows incoming messages and returns the human's answer.

    Args:
        name: The human's name, used as the ``Msg`` name.
        input_fn: Reads one answer given a prompt; sync (run in a worker thread, so it may
            block) or async. Default: :func:`agentkit._console.console_input` (a cancellable
            ``prompt_toolkit`` prompt at a terminal, plain lines from a pipe).
        output_fn: Shows text to the human. Default: ``print``.
        prompt: The input prompt. Default: ``"{name}: "``.
        max_attempts: How many times a structured answer is asked for before giving up.

    Interrupting (``await user.interrupt()``) abandons the pending read: the call returns an
    empty message with ``metadata["interrupted"] = True``. The default console prompt is
    cancelled at once, and Ctrl-C at it raises ``KeyboardInterrupt`` immediately (the
    process does not wait for Enter); a custom blocking ``input_fn`` runs in a worker
    thread that finishes (its line dropped) when it returns.

    Hooks (``register_hook``): only ``pre_reply`` and ``post_reply`` fire, which is what a
    ``MsgHub`` needs to broadcast the human's turns.
    """

    def __init__(
        self,
        name: str = "user",
        input_fn: InputFn | None = None,
        *,
        output_fn: OutputFn | None = None,
        prompt: str | None = None,
        max_attempts: int = 3,
    ) -> None:
        if max_attempts < 1:
            raise UsageError("max_attempts must be at least 1")
        self.name = name
        self.input_fn: InputFn = input_fn or console_input
        self.output_fn: OutputFn = output_fn or print
        self.prompt = prompt if prompt is not None else f"{name}: "
        self.max_attempts = max_attempts
        self._hooks: HookRegistry | None = None
        self._scope: anyio.CancelScope | None = None

    # -- the agent interface -----------------------------------------------------------
    async def __call__(
        self,
        msg: MsgInput = None,
        *,
        output_type: type[BaseModel] | None = None,
    ) -> Msg:
        """Show ``msg`` (if any), read the human's answer and return it as a user message.

        Args:
            msg: What the human should see first.
            output_type: A pydantic model the answer must validate against (as JSON);
                the validated dump goes into ``reply.metadata["structured_input"]``.

        Raises:
            AgentBusyError: if this user is already being asked something.
            ValueError: when ``max_attempts`` structured answers were all invalid.
        """
        if self._scope is not None:
            raise AgentBusyError(f"{self.name!r} is already waiting for input")
        kwargs: dict[str, Any] = {"msg": msg, "output_type": output_type}
        self._scope = anyio.CancelScope()
        try:
            if self._hooks is not None:
                kwargs = await self._hooks.run_pre("pre_reply", self, kwargs)
            reply: Msg | None = None
            with self._scope:
                reply = await self.reply(kwargs["msg"], output_type=kwargs["output_type"])
            if reply is None:  # interrupted
                reply = Msg(self.name, "", "user", metadata={"interrupted": True})
            if self._hooks is not None:
                reply = await self._hooks.run_post("post_reply", self, kwargs, reply)
            return reply
        finally:
            self._scope = None

    async def reply(
        self,
        msg: MsgInput = None,
        *,
        output_type: type[BaseModel] | None = None,
    ) -> Msg:
        """The reply itself, without hooks or interruption handling."""
        await self.observe(msg)
        if output_type is None:
            return Msg(self.name, await self._read(self.prompt), "user")
        return await self._read_structured(output_type)

    async def observe(self, msg: MsgInput) -> None:
        """Show messages to the human (what other participants said in a ``MsgHub``).

        On the console (the default ``output_fn``), a reply that an agent with
        ``print_hint=True`` already streamed there is not printed a second time.
        """
        if msg is None:
            return
        if isinstance(msg, str):
            msg = Msg("user", msg, "user")
        on_console = self.output_fn is print
        for one in [msg] if isinstance(msg, Msg) else msg:
            if on_console and printed_on_console(one.id):
                continue
            self.output_fn(_render(one))

    @property
    def is_replying(self) -> bool:
        """Whether the human is being asked something right now."""
        return self._scope is not None

    async def interrupt(self, msg: Msg | None = None) -> bool:
        """Abandon the pending read; the pending call returns an interrupted message.

        Returns:
            Whether a read was pending.
        """
        if self._scope is None:
            return False
        self._scope.cancel()
        return True

    # -- input -------------------------------------------------------------------------
    async def _read(self, prompt: str) -> str:
        fn = self.input_fn
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        ):
            result: Any = fn(prompt)
        else:
            # A blocking read must not stall the event loop; it is abandoned on cancel.
            result = await anyio.to_thread.run_sync(fn, prompt, abandon_on_cancel=True)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, str):
            raise UsageError(f"input_fn must return a str, got {type(result).__name__}")
        return result

    async def _read_structured(self, model: type[BaseModel]) -> Msg:
        from pydantic import ValidationError

        prompt = f"Answer with a JSON object for {model.__name__}: {describe_fields(model)}\n"
        error: Exception | None = None
        for attempt in range(1, self.max_attempts + 1):
            text = await self._read(prompt + self.prompt)
            try:
                value = model.model_validate_json(text.strip() or "{}")
            except ValidationError as exc:
                error = exc
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
                )
                self.output_fn(f"Invalid answer ({attempt}/{self.max_attempts}): {problems}")
                continue
            dump = value.model_dump(mode="json")
            return Msg(self.name, text, "user", metadata={"structured_input": dump})
        raise ValueError(
            f"{self.name!r} gave no valid {model.__name__} in {self.max_attempts} attempts: {error}"
        ) from error

    def __repr__(self) -> str:
        return f"UserAgent(name={self.name!r})"
