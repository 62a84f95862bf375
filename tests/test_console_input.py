"""Console input in a real pseudo-terminal (issue 13, item 25).

- ``UserAgent()`` kept the process alive after Ctrl-C at its prompt until Enter was pressed
  (its ``input()`` ran in a worker thread the interpreter waits for at exit).
- ``interrupt_on_sigint(agent)`` routes Ctrl-C to ``agent.interrupt()`` in users' own apps.
- Type-ahead in ``agentkit chat``: what is typed while an answer prints is read next.
"""

from __future__ import annotations

import os
import pathlib
import sys
import textwrap

import pexpect
import pytest

from tests.test_cli_chat import PROMPT, finish, spawn

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


TERMS = ["dumb", "xterm"]  # plain line reading / the prompt_toolkit prompt


def _run_script(tmp_path: pathlib.Path, source: str, term: str = "dumb") -> pexpect.spawn:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "TERM": term}
    return pexpect.spawn(
        sys.executable, [str(script)], cwd=str(tmp_path), env=env, encoding="utf-8", timeout=20
    )


USER_APP = """
    import anyio
    from agentkit import UserAgent

    async def main() -> None:
        try:
            msg = await UserAgent("me")()
        except EOFError:
            print("END OF INPUT")
            return
        print("GOT", repr(msg.get_text()))

    anyio.run(main)
"""


@pytest.mark.parametrize("term", TERMS)
def test_user_agent_reads_a_line_and_end_of_input(tmp_path: pathlib.Path, term: str) -> None:
    child = _run_script(tmp_path, USER_APP, term)
    try:
        child.expect("me:")
        child.sendline("hello there")
        child.expect("GOT 'hello there'")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    child = _run_script(tmp_path, USER_APP, term)
    try:
        child.expect("me:")
        child.sendeof()
        child.expect("END OF INPUT")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


@pytest.mark.parametrize("term", TERMS)
def test_ctrl_c_at_the_user_agent_prompt_exits_without_enter(
    tmp_path: pathlib.Path, term: str
) -> None:
    child = _run_script(tmp_path, USER_APP, term)
    try:
        child.expect("me:")
        child.sendintr()
        # No Enter is ever sent: the process must end on its own.
        child.expect(pexpect.EOF, timeout=10)
        child.close()
        assert child.exitstatus != 0 or child.signalstatus is not None
        assert "GOT" not in (child.before or "")
    finally:
        child.close(force=True)


SIGINT_APP = """
    import anyio
    from agentkit import ReActAgent, interrupt_on_sigint
    from agentkit.testing import ScriptedModel

    async def main() -> None:
        agent = ReActAgent("bot", "s", ScriptedModel(["late answer"], delay=60))
        with interrupt_on_sigint(agent):
            print("STARTED", flush=True)
            reply = await agent("hello")
        print("INTERRUPTED", reply.metadata.get("interrupted"))
        print("STILL RUNNING")

    anyio.run(main)
"""


def test_interrupt_on_sigint_stops_the_reply_not_the_program(tmp_path: pathlib.Path) -> None:
    child = _run_script(tmp_path, SIGINT_APP)
    try:
        child.expect("STARTED")
        child.sendintr()
        child.expect("INTERRUPTED True")
        child.expect("STILL RUNNING")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    finally:
        child.close(force=True)


def test_chat_reads_what_was_typed_while_the_answer_printed() -> None:
    child = spawn("--demo")
    try:
        child.sendline("research the history of tea quickly")
        child.expect("research: reading source")
        child.sendline("weather in Paris")  # typed ahead, while the research runs
        child.expect("Paris: sunny", timeout=60)
        child.expect(PROMPT)
        child.sendline("weather in Lima")
        child.sendeof()  # a Ctrl-D typed ahead, while that answer prints
        child.expect("Lima: ")
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_chat_on_the_prompt_toolkit_prompt() -> None:
    """The same chat keys with ``TERM=xterm``, where input goes through prompt_toolkit."""
    child = spawn("--demo", prompt="you>", TERM="xterm")
    try:
        child.sendline("research the history of tea")
        child.expect("research: reading source 2/10")
        child.sendintr()  # while the reply runs: interrupts the agent
        child.expect(r"\[interrupted\]")
        child.expect("you>")
        child.sendline("weather in Paris")
        child.expect("Paris: sunny")
        child.expect("you>")
        child.sendeof()  # at the prompt: exits
        assert finish(child) == 0
    finally:
        child.close(force=True)


async def test_the_chat_reader_never_goes_through_gnu_readline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``input()`` with GNU readline loaded switches the terminal out of canonical mode while
    it reads: a Ctrl-D typed ahead while an answer printed was lost in that switch, now and
    then (the type-ahead test above). The chat's reader reads plain lines instead."""
    import builtins
    import io

    from agentkit.cli._console import LineReader

    def no_input(*_: object) -> str:
        raise AssertionError("input() was used")

    monkeypatch.setattr(builtins, "input", no_input)
    monkeypatch.setattr(sys, "stdin", io.StringIO("typed ahead\n"))
    reader = LineReader(out=io.StringIO())
    assert await reader.read("you> ") == "typed ahead"
    assert await reader.read("you> ") is None  # then the end of input, in order
