"""``agentkit chat`` in a real pseudo-terminal (pexpect): streaming, Ctrl-C, follow-up, exit."""

from __future__ import annotations

import os
import pathlib
import sys

import pexpect
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = pathlib.Path(sys.executable).parent / "agentkit"
PROMPT = "you> "

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("AGENTKIT_MODEL", None)
    env.update(TERM="dumb", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def spawn(*args: str, prompt: str = PROMPT, **env: str) -> pexpect.spawn:
    command, argv = (
        (str(SCRIPT), ["chat", *args])
        if SCRIPT.exists()
        else (sys.executable, ["-m", "agentkit", "chat", *args])
    )
    child = pexpect.spawn(
        command, argv, cwd=str(ROOT), env=_env(**env), encoding="utf-8", timeout=30
    )
    child.expect(prompt)
    return child


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus is None, child.before
    return int(child.exitstatus)


def test_ctrl_c_interrupts_the_agent_not_the_program() -> None:
    child = spawn("--demo")
    try:
        child.sendline("research the history of tea")
        # The slow tool is running and streaming progress: interrupt it mid-way.
        child.expect(r"research: reading source 2/10")
        child.sendintr()
        child.expect(r"\[interrupted\]")
        child.expect(PROMPT)
        assert child.isalive()
        before = child.before
        assert "reading source 10/10" not in before  # it really stopped
        child.sendline("just the 20th century please")
        # The agent's next answer takes the follow-up into account.
        child.expect("You interrupted me")
        child.expect("Taking your follow-up into account: 'just the 20th century please'")
        child.expect(r"Research notes on 'the history of tea \(just the 20th century please\)'")
        child.expect(PROMPT)
        assert child.isalive()
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_parallel_tools_stream_and_ctrl_c_at_prompt_exits_zero() -> None:
    child = spawn("--demo")
    try:
        child.sendline("weather in Paris and Tokyo")
        child.expect(r'get_weather\(\{"city": "Paris"\}\) running')
        child.expect(r'get_weather\(\{"city": "Tokyo"\}\) running')
        child.expect(r"Here are the results for")
        child.expect(PROMPT)
        child.sendintr()  # at the prompt: exit cleanly
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_approval_is_asked_inline() -> None:
    child = spawn("--demo")
    try:
        child.sendline("email bob@example.com about lunch")
        child.expect(r"Allow send_email\? \[y/N\] ")
        child.sendline("n")
        child.expect(r"send_email \(denied\): The user denied this tool call")
        child.expect(PROMPT)
        child.sendline("email bob@example.com about dinner")
        child.expect(r"Allow send_email\? \[y/N\] ")
        child.sendline("y")
        child.expect(r"Email to bob@example.com")
        child.expect(PROMPT)
        child.sendline("/exit")
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_ctrl_c_at_an_approval_question_denies_and_loses_no_input() -> None:
    child = spawn("--demo")
    try:
        child.sendline("email bob@example.com about lunch")
        child.expect(r"Allow send_email\? \[y/N\] ")
        child.sendintr()
        child.expect(r"send_email \(denied\)")
        child.expect(PROMPT)
        # The abandoned y/N read takes this line and hands it to the new prompt.
        child.sendline("weather in Paris")
        child.expect("Paris: sunny")
        child.expect(PROMPT)
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_three_ctrl_c_force_quit_a_reply_that_will_not_stop(tmp_path: pathlib.Path) -> None:
    (tmp_path / "stubborn.py").write_text(
        "import anyio\n\n\n"
        "async def stubborn() -> str:\n"
        '    """Work that refuses to be cancelled."""\n'
        "    with anyio.CancelScope(shield=True):\n"
        "        await anyio.sleep(30)\n"
        '    return "done"\n'
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentkit", "chat", "--demo", "--tools", "stubborn:stubborn"],
        cwd=str(tmp_path),
        env=_env(),
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect(PROMPT)
        child.sendline("call stubborn")
        child.expect(r"stubborn\(\{\}\) running")
        child.sendintr()
        child.expect("interrupting the agent")
        child.sendintr()
        child.expect("press Ctrl-C again to quit")
        child.sendintr()
        child.expect("forced exit")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 130
    finally:
        child.close(force=True)


def test_session_survives_a_restart(tmp_path: pathlib.Path) -> None:
    db = str(tmp_path / "sessions.db")
    child = spawn("--demo", "--session", "s1", "--session-db", db)
    try:
        child.sendline("weather in Oslo")
        child.expect("Oslo: snow showers")
        child.expect(PROMPT)
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.close(force=True)
    child = spawn("--demo", "--session", "s1", "--session-db", db)
    try:
        assert "Resumed session 's1' (4 messages)" in child.before
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_no_key_falls_back_to_the_demo_model_with_a_notice() -> None:
    child = spawn()
    try:
        assert "No model configured" in child.before
        assert "OPENAI_API_KEY" in child.before
        assert "scripted demo model" in child.before
        child.sendline("/tools")
        child.expect("send_email \\(asks for approval\\)")
        child.expect(PROMPT)  # Ctrl-D typed before the next read starts would be lost
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.close(force=True)


def test_piped_input_runs_without_a_terminal() -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "--demo"],
        input="weather in Paris\n",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "Paris: sunny" in out.stdout


async def test_a_failed_reply_does_not_end_the_chat() -> None:
    import io

    from agentkit.agent import ReActAgent
    from agentkit.cli._chat import ChatLoop
    from agentkit.cli._console import LineReader
    from agentkit.exceptions import AuthenticationError
    from agentkit.testing import ScriptedModel

    lines = iter(["hello", "and now?", "/tools"])

    def read(prompt: str) -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    model = ScriptedModel(
        [AuthenticationError("invalid API key", provider="openai"), "hi there"], stream=True
    )
    agent = ReActAgent("bot", "s", model, print_hint=False)
    out = io.StringIO()
    status = await ChatLoop(agent, reader=LineReader(read), out=out).run()
    text = out.getvalue()
    assert status == 0
    assert "error: AuthenticationError: invalid API key" in text
    assert "bot: hi there" in text
    assert "no tools" in text


def test_mcp_server_and_python_tools_in_the_chat(tmp_path: pathlib.Path) -> None:
    import subprocess

    (tmp_path / "hello.txt").write_text("hello from MCP\n")
    (tmp_path / "mytools.py").write_text(
        "def shout(text: str) -> str:\n"
        '    """Upper-case a text.\n\n    Args:\n        text: The text.\n    """\n'
        "    return text.upper()\n"
    )
    server = f"{sys.executable} -m toolkits.filesystem --root {tmp_path} --read-only"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "chat",
            "--demo",
            "--mcp",
            server,
            "--tools",
            "mytools:shout",
        ],
        input='call read_file {"path": "hello.txt"}\ncall shout {"text": "hi"}\n/tools\n',
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "hello from MCP" in out.stdout
    assert "<- shout [ok" in out.stdout and "HI" in out.stdout
    assert "list_directory: " in out.stdout  # /tools lists the MCP server's tools


def test_bad_tools_spec_is_a_clean_error() -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "--demo", "--tools", "no_such_module:fn"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
    )
    assert out.returncode == 1
    assert "error: No module named 'no_such_module'" in out.stderr
    assert "Traceback" not in out.stderr


async def test_approval_shows_the_full_arguments_however_long() -> None:
    """Issue 13, item 11: a padded ``ls`` hid its ``; touch ...`` tail past 300 characters."""
    import io
    import json

    from agentkit.agent import ReActAgent
    from agentkit.cli._chat import ChatLoop
    from agentkit.cli._console import LineReader
    from agentkit.testing import ScriptedModel
    from agentkit.tools import Toolkit

    ran: list[str] = []
    toolkit = Toolkit()

    def run_command(command: str) -> str:
        """Run a command.

        Args:
            command: The command line.
        """
        ran.append(command)
        return "ran"

    toolkit.register_tool_function(run_command, requires_approval=True)
    hidden = "ls " + "a" * 300 + " " * 300 + "; touch /tmp/pwned"
    call = {"type": "tool_use", "id": "c1", "name": "run_command", "input": {"command": hidden}}
    agent = ReActAgent("bot", "s", ScriptedModel([[call], "done"]), toolkit, print_hint=False)
    lines = iter(["list files", "n"])

    def read(prompt: str) -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    assert await ChatLoop(agent, reader=LineReader(read), out=out).run() == 0
    text = out.getvalue()
    assert " " * 300 + "; touch /tmp/pwned" in text  # shown whole and verbatim
    size = len(json.dumps({"command": hidden}, indent=2))
    assert f"({size} characters)" in text  # with its size, so padding is noticed
    assert ran == []


def test_ctrl_d_at_an_approval_question_ends_the_line() -> None:
    """Issue 13, item 26: Ctrl-D left the next output on the question's line."""
    child = spawn("--demo")
    try:
        child.sendline("email bob@example.com about lunch")
        child.expect(r"Allow send_email\? \[y/N\] ")
        child.sendeof()
        child.expect(r"(.*)send_email \(denied\)")
        assert child.match.group(1).startswith("\r\n"), repr(child.match.group(1))
        child.expect(PROMPT)
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.close(force=True)
