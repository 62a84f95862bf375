"""Human approval across a restart: pause, save, "restart", load, approve, finish.

``send_email`` is registered with ``requires_approval=True``. When the model calls it, the
reply stops with ``metadata["pending_tool_calls"]`` instead of running it. The agent is
saved to SQLite and the process "restarts" (a brand-new agent, toolkit and model are
built, as a new process would). The new agent loads the session, a human approves, and
``agent.resume(approvals=...)`` runs the call and lets the model finish.

An ``approval_policy`` can approve safe calls automatically: here, mail to our own domain.

Offline it runs on the scripted demo model; set OPENAI_API_KEY / ANTHROPIC_API_KEY /
AGENTKIT_MODEL to use a real one.
"""

from __future__ import annotations

import pathlib
import tempfile

import anyio

from agentkit.agent import ReActAgent
from agentkit.cli import demo_model, describe_model, model_from_env
from agentkit.messages import ToolUseBlock
from agentkit.session import SQLiteSession
from agentkit.tools import Toolkit

SENT: list[str] = []


async def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: Recipient address.
        subject: Subject line.
        body: Message text.
    """
    SENT.append(to)
    return f"Sent {subject!r} to {to}."


def internal_only(call: ToolUseBlock) -> bool:
    """Auto-approve mail to our own domain; everything else waits for a human."""
    return str(call["input"].get("to", "")).endswith("@ourcompany.example")


def build_agent() -> ReActAgent:
    """What a fresh process does at start-up."""
    toolkit = Toolkit()
    toolkit.register_tool_function(send_email, requires_approval=True)
    model = model_from_env() or demo_model(chunk_delay=0)
    return ReActAgent(
        "assistant",
        "You send emails for the user with send_email. Be brief.",
        model,
        toolkit,
        print_hint=False,
        approval_policy=internal_only,
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = pathlib.Path(tmp) / "sessions.db"

        # -- process 1: the model wants to send an external email -> pause and save ------
        agent = build_agent()
        print(f"model: {describe_model(agent.model)}")
        request = "Send an email to bob@partner.example about the launch date."
        print(f"user: {request}")
        reply = await agent(request)
        pending = (reply.metadata or {}).get("pending_tool_calls", [])
        for call in pending:
            print(f"  waiting for approval: {call['name']}({call['input']})")
        await SQLiteSession(db).save("ticket-42", agent)
        print(f"  saved session 'ticket-42' to {db.name}; the process exits\n")
        del agent

        # -- process 2: a fresh agent loads the session; the human approves ------------
        agent = build_agent()
        assert await SQLiteSession(db).load("ticket-42", agent)
        print(f"restarted: {len(agent.pending_tool_calls)} call(s) still waiting")
        approvals: dict[str, bool | str] = {c["id"]: True for c in agent.pending_tool_calls}
        print("  human: approve")
        reply = await agent.resume(approvals=approvals)
        print(f"assistant: {reply.get_text()}")
        await SQLiteSession(db).save("ticket-42", agent)

        # -- internal mail is approved by the policy, no pause -------------------------
        reply = await agent("Now email the team at team@ourcompany.example about it.")
        print(f"\nassistant: {reply.get_text()}")
        print(f"\nemails sent: {SENT}")
        if model_from_env() is None:
            assert SENT == ["bob@partner.example", "team@ourcompany.example"], SENT


if __name__ == "__main__":
    anyio.run(main)
