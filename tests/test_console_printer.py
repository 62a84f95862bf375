"""``print_hint=True`` console output: tool progress is shown, and a reply is shown once."""

from __future__ import annotations

import pytest

from agentkit import ReActAgent, ToolContext, Toolkit, UserAgent
from agentkit.testing import ScriptedModel, text, tool_use


def _agent(model: ScriptedModel, *, print_hint: bool = True) -> ReActAgent:
    toolkit = Toolkit()

    async def report(ctx: ToolContext) -> str:
        """Reports progress."""
        await ctx.report_progress("halfway there", progress=1, total=2)
        await ctx.report_progress(None, progress=2, total=2)
        return "reported"

    toolkit.register_tool_function(report)
    return ReActAgent("bot", "You are a test bot.", model, toolkit, print_hint=print_hint)


async def test_print_hint_shows_tool_progress(capsys: pytest.CaptureFixture[str]) -> None:
    agent = _agent(ScriptedModel([[tool_use("report", "c1")], "done"]))
    await agent("go")
    lines = capsys.readouterr().out.splitlines()
    started = lines.index("-> report({})")
    progress = [line for line in lines if line.startswith("   report: ")]
    assert progress == ["   report: halfway there", "   report: 2/2"]
    assert started < lines.index(progress[0]) < lines.index("<- report [ok]: reported")


async def test_a_reply_printed_while_streaming_is_not_printed_again_by_the_user(
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = _agent(ScriptedModel([[text("It is 3.")]]))
    user = UserAgent("me", input_fn=lambda prompt: "thanks")
    answer = await user(await agent("what is 1 + 2?"))
    out = capsys.readouterr().out
    assert out.count("It is 3.") == 1
    assert answer.get_text() == "thanks"


async def test_the_user_still_sees_replies_nobody_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = _agent(ScriptedModel([[text("It is 3.")]]), print_hint=False)
    await UserAgent("me", input_fn=lambda prompt: "ok")(await agent("what is 1 + 2?"))
    assert capsys.readouterr().out.count("bot: It is 3.") == 1


async def test_a_custom_output_gets_every_message(capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    agent = _agent(ScriptedModel([[text("It is 3.")]]))
    user = UserAgent("me", input_fn=lambda prompt: "ok", output_fn=shown.append)
    await user(await agent("what is 1 + 2?"))
    assert shown == ["bot: It is 3."]  # a web UI or a log did not see the console
    assert capsys.readouterr().out.count("It is 3.") == 1
