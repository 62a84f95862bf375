"""``FunctionTool``: a Python function as a ``Tool``.

The schema, the argument converter and the call strategy are decided once, at registration;
a call only binds the arguments and runs the function:

- async functions are awaited; sync functions run in a worker thread
  (``anyio.to_thread.run_sync(abandon_on_cancel=True)``: an interrupt abandons the thread at
  once and its late result is discarded), never on the event loop, unless registered with
  ``inline=True``: then they are called on the event loop itself, which saves the thread
  handoff (tens of microseconds, more than a trivial function costs) but blocks the loop for
  the call's duration and cannot be interrupted mid-call (an interrupt lands when it returns);
- async generators stream each item as a progress chunk; sync generators are advanced one
  item at a time in a worker thread (on the loop with ``inline=True``); they run to their end
  and the final chunk follows :class:`~agentkit.tools._convert.ChunkCollector`'s rule
  (nothing yielded is lost).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Mapping
from contextlib import aclosing, closing
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import anyio.lowlevel
import anyio.to_thread

from agentkit._text import copy_json
from agentkit.exceptions import ToolRegistrationError
from agentkit.messages import ToolUseBlock
from agentkit.tools._base import CLOSE_TIMEOUT, ArgumentChecks, Tool
from agentkit.tools._context import ToolContext
from agentkit.tools._convert import ChunkCollector, to_content
from agentkit.tools._errors import ArgumentsError
from agentkit.tools._response import ToolResponse
from agentkit.tools._schema import CallKind, FunctionSpec, build_function_spec

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["FunctionTool", "PostProcess"]

PostProcess: TypeAlias = Callable[
    [ToolUseBlock, ToolResponse], "ToolResponse | Awaitable[ToolResponse | None] | None"
]
"""``postprocess(block, final_response)``: may return a replacement final response."""

_END = object()


def _default_name(fn: Callable[..., object]) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return str(name)


class FunctionTool(Tool):
    """A Python function (sync or async, plain or generator) wrapped as a ``Tool``.

    Attributes:
        fn: The wrapped callable.
        spec: Its schema and calling convention, built once.
        preset_kwargs: Arguments fixed at registration, hidden from the model.
        postprocess: Called with the ``tool_use`` block and the final response.
        inline: A sync function (or sync generator) is called on the event loop instead of
            in a worker thread.

    Raises:
        ToolRegistrationError: ``inline=True`` for an async function, or with a ``timeout``
            (an inline call cannot be stopped before it returns).
    """

    _parameters: dict[str, object]

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        group: str = "basic",
        preset_kwargs: Mapping[str, object] | None = None,
        requires_approval: bool = False,
        sequential: bool = False,
        timeout: float | None = None,
        postprocess: PostProcess | None = None,
        inline: bool = False,
    ) -> None:
        name = name or _default_name(fn)
        spec = build_function_spec(
            fn, name=name, description=description, preset_kwargs=preset_kwargs
        )
        if inline and spec.kind in ("async", "async_gen"):
            raise ToolRegistrationError(
                f"tool {name!r}: inline=True is for sync functions; an async one already "
                "runs on the event loop"
            )
        if inline and timeout is not None:
            raise ToolRegistrationError(
                f"tool {name!r}: an inline call cannot be stopped before it returns, so it "
                "cannot have a timeout; drop inline=True to run it in a worker thread"
            )
        super().__init__(
            name,
            spec.description,
            spec.parameters,
            group=group,
            requires_approval=requires_approval,
            sequential=sequential,
            timeout=timeout,
        )
        self.fn = fn
        self.spec: FunctionSpec = spec
        self._checks = spec.checks  # compiled once per spec, shared by its tools
        self.preset_kwargs: dict[str, object] = dict(preset_kwargs or {})
        self.postprocess = postprocess
        self.reports_progress = spec.context_param is not None
        self._kind: CallKind = spec.kind
        self.inline = inline

    @property
    def parameters(self) -> dict[str, object]:
        """The JSON schema of the arguments: this tool's own, to read or edit.

        The spec's schema is shared by every tool of the function (and by closures of one
        ``def``); it is copied here on first read, so that
        an edit (followed by ``invalidate_schema()``) changes this tool only. Requests
        (``tool_definition``) and argument checks use the shared schema until then.
        """
        parameters = self._parameters
        if parameters is self.spec.parameters:
            parameters = self._parameters = copy_json(parameters)
        return parameters

    @parameters.setter
    def parameters(self, value: dict[str, object]) -> None:
        self._parameters = value
        self._checks = None  # checked against the new schema from the next call on

    def _offered_parameters(self) -> dict[str, object]:
        return self._parameters

    @property
    def checks(self) -> ArgumentChecks:
        """The compiled argument checks: the spec's, until ``invalidate_schema()``."""
        checks = self._checks
        if checks is None:
            checks = self._checks = ArgumentChecks(self._parameters)
        return checks

    def invoke(self, arguments: dict[str, object]) -> AsyncIterator[ToolResponse]:
        """Run without a call context (a context parameter receives a detached one)."""
        detached: ToolContext[None] = ToolContext(deps=None, call_id="", tool_name=self.name)
        return self.invoke_with_context(arguments, detached)

    async def invoke_with_context(
        self, arguments: dict[str, object], context: ToolContext
    ) -> AsyncIterator[ToolResponse]:
        """Bind the arguments, run the function, yield progress chunks and the final one."""
        args, kwargs = self._bind(arguments, context)
        kind = self._kind
        final: ToolResponse | None = None
        if kind == "async":
            final = _as_final(await self.fn(*args, **kwargs))
        elif kind == "sync":
            if self.inline:
                result = self.fn(*args, **kwargs)
                # An interrupt that came during the call lands now, as it would have on the
                # thread's result: the call is reported interrupted, not answered. (No
                # other task ran meanwhile, so only a cancel called during the call can be
                # pending: checked without a trip through the event loop.)
                await anyio.lowlevel.checkpoint_if_cancelled()
            else:
                call = functools.partial(self.fn, *args, **kwargs)
                result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
            if inspect.isawaitable(result):  # a sync wrapper around a coroutine function
                result = await result
            final = _as_final(result)
        else:
            collected = ChunkCollector()
            stream = self._iterate(kind, args, kwargs)
            async with aclosing(stream):
                async for item in stream:
                    if not isinstance(item, ToolResponse):
                        item = ToolResponse(content=to_content(item), is_last=False)
                    for progress in collected.add(item):
                        yield progress
            final = collected.result()
        if self.postprocess is not None:
            final = await self._postprocess(arguments, context, final)
        yield final

    def _bind(
        self, arguments: dict[str, object], context: ToolContext
    ) -> tuple[list[Any], dict[str, object]]:
        spec = self.spec
        if self.preset_kwargs and not self.preset_kwargs.keys().isdisjoint(arguments):
            # Only reachable through **kwargs (the schema hides presets otherwise): a preset
            # (an API key, a root directory) must never be overridden by the model.
            fixed = sorted(self.preset_kwargs.keys() & arguments.keys())
            raise ArgumentsError(f"argument(s) {fixed} are fixed by the application; omit them")
        if spec.model is None:
            kwargs = {**self.preset_kwargs, **arguments}
        else:
            kwargs = {**self.preset_kwargs, **self._convert(arguments)}
        if spec.context_param is not None:
            kwargs[spec.context_param] = context
        if not spec.positional:
            return [], kwargs
        args = []
        for name in spec.positional:
            if name not in kwargs:
                break
            args.append(kwargs.pop(name))
        return args, kwargs

    def _convert(self, arguments: dict[str, object]) -> dict[str, object]:
        from pydantic import ValidationError

        spec = self.spec
        assert spec.model is not None
        try:
            instance = spec.model.model_validate(arguments)
        except ValidationError as exc:
            raise ArgumentsError(_pydantic_message(exc)) from exc
        values = {alias: getattr(instance, field) for field, alias in spec.aliases.items()}
        if spec.var_keyword:
            values.update((k, v) for k, v in arguments.items() if k not in values)
        return values

    async def _iterate(
        self, kind: CallKind, args: list[Any], kwargs: dict[str, object]
    ) -> AsyncGenerator[Any, None]:
        if kind == "async_gen":
            agen = self.fn(*args, **kwargs)
            async with aclosing(agen):
                async for item in agen:
                    yield item
            return
        # Creating a generator runs none of its code, so this is safe on the event loop.
        gen: Generator[Any, None, None] = self.fn(*args, **kwargs)
        if self.inline:
            with closing(gen):  # closed however this ends (its cleanup runs on the loop too)
                for item in gen:
                    yield item
                    await anyio.lowlevel.checkpoint()  # an interrupt lands between items
            return
        running = finished = False
        try:
            while True:
                running = True
                try:
                    item = await anyio.to_thread.run_sync(next, gen, _END, abandon_on_cancel=True)
                except anyio.get_cancelled_exc_class():
                    raise  # abandoned mid-``next``: the thread still owns the generator
                except BaseException:
                    finished = True  # the generator raised, so it is finished
                    raise
                running = False
                if item is _END:
                    finished = True
                    return
                yield item
        finally:
            # Cut short at a yield: run the generator's cleanup in a thread, bounded.
            # (Abandoned mid-``next`` it cannot be closed; it ends on its own.)
            if not finished and not running:
                with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
                    await anyio.to_thread.run_sync(gen.close, abandon_on_cancel=True)

    async def _postprocess(
        self, arguments: dict[str, object], context: ToolContext, final: ToolResponse
    ) -> ToolResponse:
        assert self.postprocess is not None
        block = ToolUseBlock(type="tool_use", id=context.call_id, name=self.name, input=arguments)
        result = self.postprocess(block, final)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return final
        result.is_last = True
        return result


def _as_final(value: object) -> ToolResponse:
    if isinstance(value, ToolResponse):
        value.is_last = True
        return value
    return ToolResponse(content=to_content(value))


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)
