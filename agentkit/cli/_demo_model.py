"""The offline *scripted demo model*, and picking a real model from the environment.

The demo model is **not a language model**: it is a :class:`~agentkit.testing.FunctionModel`
that reads the conversation and follows a few fixed rules, so the CLI and the examples run
(and show streaming, parallel tool calls, interruption and approval) with no API key and no
network. It only calls tools the agent actually offers:

- ``call TOOL {"json": "args"}`` calls ``TOOL`` with those arguments (any tool, MCP ones too);
- a message mentioning the weather in Capitalised Cities calls ``get_weather`` once per city,
  all in one turn (parallel), and a file name like ``trip.md`` adds a ``read_file`` call;
- ``research ...`` calls the slow ``research`` tool (a good moment for Ctrl-C);
- ``email ...`` / ``send ...`` calls ``send_email`` (which asks for approval);
- after tool results it answers from them; after an interrupt it takes the human's follow-up
  into account (a follow-up with "just", "only", "quick"... redoes the work quickly).

With ``AGENTKIT_MODEL=provider:model``, ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` set,
:func:`model_from_env` returns a real model instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence, Sized
from typing import TYPE_CHECKING, Any

import anyio

from agentkit.messages import Msg, ToolUseBlock
from agentkit.testing import FunctionModel, RequestInfo, ScriptItem, text, tool_use
from agentkit.tools._context import ToolContext

if TYPE_CHECKING:
    from agentkit.models._base import ChatModel
    from agentkit.tools import Toolkit

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "DEMO_LABEL",
    "demo_model",
    "demo_toolkit",
    "describe_model",
    "get_weather",
    "model_from_env",
    "research",
    "send_email",
]

DEMO_LABEL = "scripted demo model (offline rules, not an LLM)"
DEFAULT_OPENAI_MODEL = "openai:gpt-4.1-mini"
DEFAULT_ANTHROPIC_MODEL = "anthropic:claude-sonnet-4-5"
QUICK_WORDS = ("just", "only", "quick", "short", "brief", "summary", "instead", "top")
_STOP_WORDS = {"What", "How", "Is", "Tell", "Please", "And", "The", "Check", "Weather", "In", "I"}


# -- choosing a model ------------------------------------------------------------------
def model_from_env(*, stream: bool = True) -> ChatModel | None:
    """The real model the environment asks for, or None (then use the demo model).

    ``AGENTKIT_MODEL`` (``"provider:model"``) wins; otherwise ``OPENAI_API_KEY`` selects
    ``openai:gpt-4.1-mini`` and ``ANTHROPIC_API_KEY`` selects ``anthropic:claude-sonnet-4-5``.

    Args:
        stream: Whether the model streams its answers.
    """
    from agentkit.models import from_string

    spec = os.environ.get("AGENTKIT_MODEL", "").strip()
    if not spec:
        if os.environ.get("OPENAI_API_KEY"):
            spec = DEFAULT_OPENAI_MODEL
        elif os.environ.get("ANTHROPIC_API_KEY"):
            spec = DEFAULT_ANTHROPIC_MODEL
        else:
            return None
    return from_string(spec, stream=stream)


def describe_model(model: ChatModel) -> str:
    """A one-line, human-readable name for ``model`` (labels the demo model clearly)."""
    if getattr(model, "provider", "") == "scripted":
        if model.model_name == "demo":
            return DEMO_LABEL
        return f"scripted model {model.model_name!r} (offline, not an LLM)"
    return f"{model.provider}:{model.model_name}"


def demo_model(*, stream: bool = True, chunk_delay: float = 0.01) -> FunctionModel:
    """The offline scripted demo model (see the module docstring for its rules).

    Args:
        stream: Stream answers in chunks, like a provider.
        chunk_delay: Seconds between streamed chunks (so the streaming is visible).
    """
    return FunctionModel(
        decide, stream=stream, model_name="demo", chunk_delay=chunk_delay, chunks_per_block=12
    )


# -- demo tools ------------------------------------------------------------------------
_WEATHER = {
    "paris": "sunny, 21 °C",
    "tokyo": "light rain, 17 °C",
    "lima": "overcast, 19 °C",
    "cairo": "clear, 31 °C",
    "oslo": "snow showers, -2 °C",
}


async def get_weather(city: str) -> str:
    """Get the current weather in a city (the demo takes one second per call).

    Args:
        city: The city name, e.g. "Paris".
    """
    await anyio.sleep(1.0)
    return f"{city}: {_WEATHER.get(city.lower(), 'mild, 20 °C')}"


async def research(topic: str, ctx: ToolContext, quick: bool = False) -> str:
    """Research a topic in depth (slow: about 5 seconds; quick: under a second).

    Args:
        topic: What to research.
        ctx: The call's context (injected, hidden from the model).
        quick: Only a short overview.
    """
    steps, pause = (2, 0.2) if quick else (10, 0.5)
    for step in range(1, steps + 1):
        await ctx.report_progress(f"reading source {step}/{steps}", progress=step, total=steps)
        await anyio.sleep(pause)
    depth = "a quick overview" if quick else f"{steps} sources"
    return f"Research notes on {topic!r} ({depth}): three key facts and two open questions."


async def send_email(to: str, subject: str, body: str) -> str:
    """Send an email (needs the user's approval; the demo only pretends to send it).

    Args:
        to: Recipient address.
        subject: Subject line.
        body: Message text.
    """
    await anyio.sleep(0.1)
    return f"Email to {to} with subject {subject!r} sent ({len(body)} characters)."


def demo_toolkit() -> Toolkit:
    """A Toolkit with the demo tools (``send_email`` requires approval)."""
    from agentkit.tools import Toolkit

    toolkit = Toolkit()
    toolkit.register_tool_function(get_weather)
    toolkit.register_tool_function(research)
    toolkit.register_tool_function(send_email, requires_approval=True)
    return toolkit


# -- the rules ---------------------------------------------------------------------------
def _is_human(msg: Msg) -> bool:
    return msg.role == "user" and not msg.has_blocks("tool_result") and bool(msg.get_text())


def _last_human(messages: Sequence[Msg]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if _is_human(messages[i]):
            return i
    return -1


def _was_interrupted(messages: Sequence[Msg], before: int) -> list[str]:
    """Names of calls cut by an interrupt since the previous human message before ``before``."""
    start = _last_human(messages[:before])
    cut: list[str] = []
    for msg in messages[start + 1 : before]:
        if msg.metadata and msg.metadata.get("interrupted"):
            cut.append("the answer")
            continue
        for block in msg.get_blocks("tool_result"):
            output = block["output"]
            if block.get("is_error") and _is_interrupted(output):
                cut.append(block["name"])
        if msg.role == "assistant" and msg.get_text() and not msg.has_blocks("tool_use"):
            cut = []  # a finished answer came after the cut: the work was resumed and done
    return cut


def decide(messages: list[Msg], info: RequestInfo) -> ScriptItem:
    """The demo model's whole brain: one answer computed from the conversation."""
    human = _last_human(messages)
    if human < 0:
        return "Hello! I am the offline demo model. Ask me something."
    names = set(info.tool_names)
    request = messages[human].get_text()
    results = [b for m in messages[human + 1 :] for b in m.get_blocks("tool_result")]
    redo = _interrupted_calls(messages)
    if redo:  # resumed with no new message after an interrupt: pick the work up again
        listed = ", ".join(c["name"] for c in redo)
        return [text(f"Resuming where I was interrupted: calling {listed} again."), *redo]
    if results:
        return _answer_from_results(request, results, names)
    cut = _was_interrupted(messages, human)
    if cut:
        return _follow_up(request, cut, messages, names)
    return _plan(request, names) or _fallback(request, names)


def _interrupted_calls(messages: Sequence[Msg]) -> list[ToolUseBlock]:
    """The calls to redo when the conversation ends with interrupted tool results."""
    last = messages[-1] if messages else None
    blocks = last.get_blocks("tool_result") if last is not None else []
    cut = {b["id"] for b in blocks if b.get("is_error") and _is_interrupted(b["output"])}
    if not cut:
        return []
    calls = [b for m in messages for b in m.get_blocks("tool_use") if b["id"] in cut]
    return [tool_use(c["name"], **c["input"]) for c in calls]


def _is_interrupted(output: object) -> bool:
    return isinstance(output, str) and "interrupted" in output.lower()


def _plan(request: str, names: set[str], quick: bool = False) -> list[Any] | None:
    """Tool calls for a request, or None when no rule matches."""
    explicit = re.match(r"\s*call\s+([\w.\-]+)\s*(\{.*\})?\s*$", request, re.S | re.I)
    if explicit and explicit.group(1) in names:
        try:
            args = json.loads(explicit.group(2) or "{}")
        except ValueError:
            return [text(f"The arguments are not valid JSON: {explicit.group(2)}")]
        return [tool_use(explicit.group(1), **args)]
    lowered = request.lower()
    calls: list[ToolUseBlock] = []
    if "weather" in lowered and "get_weather" in names:
        calls += [tool_use("get_weather", city=c) for c in _cities(request)]
    files = re.findall(r"\b[\w\-]+\.(?:md|txt|json|py|toml|csv)\b", request)
    if files and "read_file" in names:
        calls += [tool_use("read_file", path=f) for f in dict.fromkeys(files)]
    if "research" in lowered and "research" in names:
        topic = re.sub(r"(?i).*?research(?:ing)?\s*(?:on|about|into)?\s*", "", request, count=1)
        calls.append(tool_use("research", topic=topic.strip(" ?.!") or request, quick=quick))
    if re.search(r"\b(e-?mail|send)\b", lowered) and "send_email" in names:
        to = re.search(r"[\w.+-]+@[\w-]+\.[\w.]+", request)
        calls.append(
            tool_use(
                "send_email",
                to=to.group(0) if to else "team@example.com",
                subject="Note from the agentkit demo",
                body=request,
            )
        )
    if not calls:
        return None
    intro = f"Calling {len(calls)} tools at once." if len(calls) > 1 else "One moment."
    return [text(intro), *calls]


def _cities(request: str) -> list[str]:
    found = [w for w in re.findall(r"\b[A-Z][a-z]+\b", request) if w not in _STOP_WORDS]
    return list(dict.fromkeys(found)) or ["Paris"]


def _short(output: str | Sized, limit: int = 160) -> str:
    shown = output if isinstance(output, str) else f"[{len(output)} content blocks]"
    shown = " ".join(shown.split())
    return shown if len(shown) <= limit else shown[:limit] + "…"


def _answer_from_results(request: str, results: list[Any], names: set[str]) -> ScriptItem:
    lines = [f"Here are the results for {request.strip()!r}:"]
    for block in results:
        mark = ""
        if block.get("is_error"):
            denied = "denied" in _short(block["output"]).lower()
            mark = " (denied)" if denied else " (failed)"
        lines.append(f"- {block['name']}{mark}: {_short(block['output'])}")
    return "\n".join(lines)


def _follow_up(request: str, cut: list[str], messages: list[Msg], names: set[str]) -> ScriptItem:
    """React to a human message sent after an interrupt: acknowledge and adapt."""
    stopped = ", ".join(dict.fromkeys(cut))
    lowered = request.lower()
    quick = any(re.search(rf"\b{w}\b", lowered) for w in QUICK_WORDS)
    previous = _last_human(messages[: _last_human(messages)])
    earlier = messages[previous].get_text() if previous >= 0 else ""
    # The follow-up refines the interrupted request unless it is a new request itself.
    plan = _plan(request, names, quick=quick)
    if plan is None and quick and earlier:
        plan = _plan(f"{earlier.strip(' .?!')} ({request.strip(' .?!')})", names, quick=True)
    note = f"You interrupted me ({stopped} stopped). Taking your follow-up into account: "
    note += f"{request.strip()!r}."
    if plan is not None:
        return [text(note), *[b for b in plan if b["type"] == "tool_use"]]
    return f"{note} Understood, I will not continue {stopped}. What next?"


def _fallback(request: str, names: set[str]) -> str:
    tools = ", ".join(sorted(names)) or "none"
    return (
        f"[{DEMO_LABEL}] I follow fixed rules, so I cannot really answer {request.strip()!r}. "
        "Try: 'weather in Paris and Tokyo', 'research the history of tea' (slow: press Ctrl-C "
        "while it runs, then type a follow-up), 'email bob@example.com about lunch' (asks for "
        f"approval), or 'call TOOL {{\"arg\": 1}}'. Tools available: {tools}."
    )
