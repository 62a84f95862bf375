"""``agentkit chat``: talk to an agent in the terminal, interrupt it with Ctrl-C.

While the agent works, Ctrl-C interrupts the *agent* (its model call and running tools stop,
its memory stays valid), not the program: the prompt comes back and what you type next is
the follow-up the agent continues with (an empty line lets it resume as it was). At the
prompt, Ctrl-C or Ctrl-D exits. Tools that need approval are asked about inline (y/N).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio

from agentkit._text import terminal_safe
from agentkit.cli._console import (
    EventRenderer,
    LineReader,
    short,
    sigint_handler,
    terminal_restored,
)
from agentkit.cli._demo_model import describe_model
from agentkit.cli._setup import build_toolkit, mcp_server, resolve_model, sse_hint
from agentkit.exceptions import AgentkitError

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.messages import Msg
    from agentkit.session import Session

__all__ = ["ChatLoop", "add_arguments", "run"]

DEFAULT_SYS_PROMPT = (
    "You are a helpful assistant working in a terminal. Use the tools when they help; "
    "answer concisely. If the user interrupts you, follow their new instruction."
)
DEFAULT_SESSION_DB = Path("~/.agentkit/sessions.db")
FORCE_QUIT_PRESSES = 3
HELP = (
    "Type a message and press Enter. While the agent works, Ctrl-C interrupts it; then type "
    "a follow-up (or an empty line to let it continue). Ctrl-D or Ctrl-C at the prompt exits.\n"
    "Commands: /tools (list tools), /help, /exit"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``chat`` options to ``parser``."""
    parser.add_argument("--model", help="provider:model, e.g. openai:gpt-4.1-mini, ollama:qwen3")
    parser.add_argument("--demo", action="store_true", help="use the offline scripted demo model")
    parser.add_argument(
        "--demo-tools", action="store_true", help="add the demo tools (weather, research, email)"
    )
    parser.add_argument(
        "--mcp", action="append", default=[], metavar="CMD", help='stdio MCP server, "CMD ARGS"'
    )
    parser.add_argument(
        "--mcp-http", action="append", default=[], metavar="URL", help="streamable HTTP MCP server"
    )
    parser.add_argument(
        "--tools", action="append", default=[], metavar="MODULE:NAME", help="Python tool(s)"
    )
    parser.add_argument("--session", metavar="ID", help="save and restore the chat under ID")
    parser.add_argument(
        "--session-db", type=Path, default=None, help=f"SQLite file (default {DEFAULT_SESSION_DB})"
    )
    parser.add_argument("--sys-prompt", default=DEFAULT_SYS_PROMPT, help="the system prompt")
    parser.add_argument("--name", default="assistant", help="the agent's name")
    parser.add_argument("--max-iters", type=int, default=10, help="model calls per reply")


def run(args: argparse.Namespace) -> int:
    """Run the chat until the human exits; return the exit status."""
    # No GNU readline: a terminal prompt_toolkit can drive gets its prompt (editing,
    # history); plain reads elsewhere keep typed-ahead lines and Ctrl-D in order.
    try:
        return anyio.run(_main, args, backend="asyncio")
    except KeyboardInterrupt:  # Ctrl-C while starting up (MCP servers...): no traceback
        return 130


async def _main(args: argparse.Namespace) -> int:
    from agentkit.agent import ReActAgent

    out = sys.stdout
    try:
        model, notice = resolve_model(args.model, demo=args.demo)
    except (AgentkitError, ValueError) as exc:  # a bad --model / AGENTKIT_MODEL spec
        print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2
    if notice:
        print(notice, file=out)
    demo_tools = args.demo_tools or getattr(model, "model_name", "") == "demo"
    async with contextlib.AsyncExitStack() as stack:
        try:
            toolkit = await build_toolkit(
                stack, args.tools, args.mcp, args.mcp_http, demo_tools=demo_tools
            )
        except (AgentkitError, ImportError, AttributeError, ValueError) as exc:
            print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
            for url in args.mcp_http:
                hint = sse_hint(mcp_server(http=url))
                if hint is not None:
                    print(f"hint: {url}: {hint}", file=sys.stderr)
            return 1
        agent = ReActAgent(
            args.name, args.sys_prompt, model, toolkit, max_iters=args.max_iters, print_hint=False
        )
        try:
            session = await _open_session(args, agent, out)
        except AgentkitError as exc:  # refuse to overwrite a session we cannot read
            print(
                f"error: session {args.session!r} cannot be loaded: {terminal_safe(str(exc))}",
                file=sys.stderr,
            )
            return 1
        print(f"agentkit chat | model: {describe_model(model)} | tools: {len(toolkit.tools)}")
        print(HELP, file=out)
        return await ChatLoop(agent, session=session, session_id=args.session, out=out).run()


async def _open_session(args: argparse.Namespace, agent: ReActAgent, out: TextIO) -> Session | None:
    """The ``--session`` store, with the saved chat loaded into ``agent`` (if any)."""
    if not args.session:
        return None
    from agentkit.session import SQLiteSession

    db = (args.session_db or DEFAULT_SESSION_DB).expanduser()
    session = SQLiteSession(db)
    if await session.load(args.session, agent):
        count = len(await agent.memory.get_memory())
        print(f"Resumed session {args.session!r} ({count} messages) from {db}", file=out)
    return session


def describe_arguments(name: str, arguments: dict[str, object]) -> str:
    """What a human approves: the *whole* arguments, verbatim, with their size.

    Never shortened or whitespace-collapsed: a padded ``ls`` hiding ``; touch ...`` past
    a cut would be approved unseen. (Control sequences are neutralized when printed.)
    """
    text = json.dumps(arguments, ensure_ascii=False, indent=2)
    return f"{name} wants to run with these arguments ({len(text)} characters):\n{text}"


class ChatLoop:
    """The read -> reply loop, with Ctrl-C routed to the agent while it replies.

    Args:
        agent: The agent to talk to.
        reader: Reads the human's lines (console by default).
        session: Where to save the agent after every reply (optional).
        session_id: The id to save under.
        out: Where to write.
    """

    def __init__(
        self,
        agent: ReActAgent,
        *,
        reader: LineReader | None = None,
        session: Session | None = None,
        session_id: str | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.agent = agent
        self.reader = reader or LineReader(out=out)
        self.session = session
        self.session_id = session_id
        self.out = out or sys.stdout
        self.render = EventRenderer(agent.name, self.out)
        self._replying = False
        self._prompting = False
        self._presses = 0  # Ctrl-C presses during the current reply
        self._restore_terminal: Callable[[], None] = lambda: None
        self._interrupt = anyio.Event()
        self._quit = anyio.Event()

    def _on_sigint(self) -> None:
        if not self._replying:
            # At the prompt: quit. Between a reply and the next prompt (saving the session),
            # the press is ignored: it was meant for a reply that had just ended.
            if self._prompting:
                self._quit.set()
            return
        self._presses += 1
        self._interrupt.set()
        if self._presses == FORCE_QUIT_PRESSES - 1:
            self.render.line("(still stopping: press Ctrl-C again to quit agentkit)")
        elif self._presses >= FORCE_QUIT_PRESSES:
            # The reply does not end (a tool shielded from cancellation?): last resort.
            self.render.line("forced exit")
            self._restore_terminal()
            os._exit(130)

    async def run(self) -> int:
        """Chat until Ctrl-D, Ctrl-C at the prompt, or ``/exit``; return 0.

        Ctrl-C pressed three times during one reply that will not stop exits at once (130).
        """
        with sigint_handler(self._on_sigint), terminal_restored() as restore:
            self._restore_terminal = restore
            await self._loop()
        return 0

    async def _loop(self) -> None:
        if self.agent.pending_tool_calls:  # a restored session stopped for approval
            await self._settle_approvals()
        interrupted = False
        while True:
            line = await self._prompt("you> ")
            if line is None:
                return
            text = line.strip()
            if text in ("/exit", "/quit"):
                return
            if text.startswith("/"):
                self._command(text)
                continue
            if not text and not interrupted:
                continue
            # After an interrupt an empty line resumes the task as it was.
            reply = await self._reply(functools.partial(self.agent, text or None))
            interrupted = bool(reply and (reply.metadata or {}).get("interrupted"))
            if interrupted:
                self.render.line("(interrupted: type a follow-up, or Enter to continue)")
            await self._settle_approvals()

    async def _prompt(self, prompt: str) -> str | None:
        """One line from the human; None on Ctrl-D or Ctrl-C."""
        result: list[str | None] = []
        self._quit = anyio.Event()
        self._prompting = True
        try:
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    result.append(await self.reader.read(prompt))
                    tg.cancel_scope.cancel()

                async def quit_on_sigint() -> None:
                    await self._quit.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(read)
                tg.start_soon(quit_on_sigint)
        finally:
            self._prompting = False
        if not result:  # Ctrl-C at the prompt: the cursor is still after the prompt
            self.out.write("\n")
            self.out.flush()
        return result[0] if result else None

    async def _reply(self, start: Callable[[], Awaitable[Msg]]) -> Msg | None:
        """Run one reply, rendering its events; Ctrl-C interrupts it."""
        from agentkit.agent import EventStream

        self._interrupt = anyio.Event()
        self._replying = True
        self._presses = 0
        reply: Msg | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._interrupt_on_sigint)
                try:
                    async with EventStream(self.agent, start) as events:
                        async for event in events:
                            self.render(event)
                    reply = events.reply
                except Exception as exc:  # a failed reply (provider down...) is not fatal
                    self.render.line(f"error: {type(exc).__name__}: {exc}")
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._replying = False
        await self._save()
        return reply

    async def _interrupt_on_sigint(self) -> None:
        await self._interrupt.wait()
        self.render.line("^C interrupting the agent...")
        await self.agent.interrupt()

    async def _settle_approvals(self) -> None:
        """Ask y/N for every call waiting for approval, then resume (repeat while needed)."""
        while self.agent.pending_tool_calls:
            approvals: dict[str, bool | str] = {}
            for call in self.agent.pending_tool_calls:
                self.render.line(describe_arguments(call["name"], call["input"]))
                answer = await self._prompt(f"Allow {call['name']}? [y/N] ")
                approvals[call["id"]] = (answer or "").strip().lower() in ("y", "yes")
            reply = await self._reply(functools.partial(self.agent.resume, approvals))
            if reply is None or (reply.metadata or {}).get("interrupted"):
                return  # failed or interrupted: back to the prompt

    async def _save(self) -> None:
        if self.session is None or self.session_id is None:
            return
        try:
            await self.session.save(self.session_id, self.agent)
        except AgentkitError as exc:
            self.render.line(f"warning: session not saved: {exc}")

    def _command(self, text: str) -> None:
        if text == "/tools":
            tools = self.agent.toolkit.tools
            if not tools:
                self.render.line("no tools")
            for name, tool in sorted(tools.items()):
                approval = " (asks for approval)" if tool.requires_approval else ""
                self.render.line(f"{name}{approval}: {short(tool.description, 100)}")
        elif text == "/help":
            self.render.line(HELP)
        else:
            self.render.line(f"unknown command {text!r}; try /help")
