"""The web chat's browser test agent: the serve tests' demo agent, plus a few scripted answers.

``python -m tests._webchat_agents PORT DB TOKEN`` serves it with uvicorn. On top of the demo
rules (tools, approvals, interrupts) the model answers these prompts itself:

- ``show markdown``: a sample using every markdown element the page renders;
- ``hostile markdown``: links and markup that must stay inert text;
- ``long answer``: about 100 KB of markdown streamed in 5,000 deltas;
- ``fail once ...``: a model connection error the first time, an answer on the retry;
- ``also ...`` (a steer typed while a tool runs): an answer naming the note and the tool
  results that came before it.

Two tools are added to the demo's: ``brief_task`` (about two seconds, with progress: the
window to steer in) and ``janitor``, an agent used as a tool whose own tool
``delete_draft`` needs approval (nested approvals: ``call janitor {"task": "..."}`` makes it
delete two drafts, both calls waiting as ``<outer id>/<inner id>``).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Sequence

import anyio

from agentkit import ReActAgent
from agentkit.cli._demo_model import demo_model
from agentkit.exceptions import ModelConnectionError
from agentkit.messages import Msg
from agentkit.models import ChatModel, ChatResponse, ModelRequest
from agentkit.testing import FunctionModel, ScriptItem, tool_use
from agentkit.tools import ToolContext, Toolkit
from tests._serve_agents import make_agent as make_demo_agent

MARKDOWN = """# Release notes

Some **bold** text, some *emphasis*, and `inline code` in a paragraph
that spans two lines. See [the docs](https://example.com/docs) or
[write to us](mailto:team@example.com).

## Steps

1. Install it
2. Configure it:
   - set the token
   - pick a model
     - nested deeper
3. Run it

> A quote, with **strong** words.

```python
def hello(name: str) -> str:
    return f"<b>hello</b> {name}"
```

| Option | Default | Meaning |
| :----- | :-----: | ------: |
| `limit` | 100 | page size |
| cursor | none | next page |

Done."""

HOSTILE = """Links: [click me](javascript:alert(1)) and [also](JaVaScRiPt:window.__xss=6) and
[data](data:text/html,<script>window.__xss=7</script>) and <javascript:window.__xss=8>.

Markup: <img src=x onerror="window.__xss=5"> <script>window.__xss=9</script> <b>not bold</b>

![an image](https://example.com/x.png)

```html
<img src=x onerror="window.__xss=10">
```"""

_LONG_DELTAS = 5000


def long_answer() -> str:
    """About 100 KB of mixed markdown (paragraphs, lists, code, tables)."""
    parts = []
    for i in range(160):
        parts.append(
            f"## Section {i}\n\nParagraph {i} with **bold**, *emphasis*, `code` and a "
            f"[link](https://example.com/{i}). " + "Some more words to read. " * 12 + "\n"
        )
        if i % 4 == 0:
            parts.append(f"- item {i}.1\n- item {i}.2\n  - nested {i}\n")
        if i % 4 == 1:
            parts.append("```js\n" + f"const x{i} = {i};\n" * 8 + "```\n")
        if i % 4 == 2:
            parts.append("| a | b |\n|---|---|\n" + f"| {i} | {i * 2} |\n" * 5)
    text = "\n".join(parts)
    return text[: 100 * 1024]


class WebChatModel(ChatModel):
    """The demo model, plus the scripted answers in the module docstring."""

    provider = "scripted"
    offline = True

    def __init__(self) -> None:
        super().__init__("webchat", stream=True)
        self.demo = demo_model(chunk_delay=0.005)

    async def _request(self, request: ModelRequest) -> ChatResponse:
        """The whole answer (the last streamed chunk)."""
        last = ChatResponse(content=[])
        async for chunk in self._request_stream(request):
            last = chunk
        return last

    async def _request_stream(self, request: ModelRequest) -> AsyncGenerator[ChatResponse, None]:
        """A scripted answer for the prompts above; the demo model's otherwise."""
        messages = request.messages
        humans = [m for m in messages if m.role == "user" and not m.has_blocks("tool_result")]
        prompt = humans[-1].get_text().strip() if humans else ""
        if prompt.startswith("fail once"):
            if prompt not in _FAILED:  # the first try fails as a real provider's outage does
                _FAILED.add(prompt)
                raise ModelConnectionError("openai: Connection error. (ConnectError('refused'))")
            answer, deltas = "Recovered on the retry.", 4
        elif prompt == "show markdown":
            answer, deltas = MARKDOWN, 60
        elif prompt == "hostile markdown":
            answer, deltas = HOSTILE, 30
        elif prompt.startswith("also "):
            answer, deltas = steered_answer(prompt, messages), 10
        elif prompt == "long answer":
            answer, deltas = long_answer(), _LONG_DELTAS
        else:
            async for chunk in self.demo.request_stream(request):
                yield chunk
            return
        step = max(1, len(answer) // deltas)
        ends = [*range(step, len(answer), step), len(answer)]
        for i, end in enumerate(ends):  # cumulative chunks, as providers stream them
            yield ChatResponse(content=[{"type": "text", "text": answer[:end]}])
            if deltas <= 100 or i % 5 == 4:  # spread over time: many network reads
                await anyio.sleep(0.001 if deltas > 100 else 0.01)


_FAILED: set[str] = set()


def output_text(output: object) -> str:
    """A tool result's text (its output is a string or a list of blocks)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return " ".join(str(b.get("text", "")) for b in output if isinstance(b, dict))
    return str(output)


def steered_answer(prompt: str, messages: Sequence[Msg]) -> str:
    """The answer to a steer: the note, and the results of the tools that ran before it."""
    results = [output_text(b["output"]) for m in messages for b in m.get_blocks("tool_result")]
    done = f" (after: {results[-1]})" if results else ""
    return f"Noted while working: {prompt[5:]}{done}."


async def brief_task(topic: str, ctx: ToolContext) -> str:
    """Work on a topic for about two seconds, reporting progress.

    Args:
        topic: What to work on.
        ctx: The call context.
    """
    for step in range(1, 9):
        await ctx.report_progress(f"step {step}/8 on {topic}", progress=step, total=8)
        await anyio.sleep(0.25)
    return f"finished {topic}"


async def delete_draft(path: str) -> str:
    """Delete a draft file (needs approval; pretends).

    Args:
        path: The draft's path.
    """
    return f"deleted {path}"


def janitor_decides(messages: list[Msg], tools: object) -> ScriptItem:
    """The inner agent: two deletions (parallel, both need approval), then a summary.

    A function of the conversation, not a ``ScriptedModel``: the server builds a fresh agent
    for each request, so a script's position would not survive the pause for approval.
    """
    results = [b for m in messages for b in m.get_blocks("tool_result")]
    if not results:
        return [
            tool_use("delete_draft", "d1", path="drafts/old-plan.md"),
            tool_use("delete_draft", "d2", path="drafts/keep-me.md"),
        ]
    outcome = "; ".join(f"{b['id']}: {output_text(b['output'])}" for b in results)
    return f"Janitor report: {outcome}"


def make_janitor() -> ReActAgent:
    """The agent used as a tool, with a tool that needs approval."""
    toolkit = Toolkit()
    toolkit.register_tool_function(delete_draft, requires_approval=True)
    model = FunctionModel(janitor_decides, stream=True, model_name="janitor")
    return ReActAgent("janitor", "You tidy up drafts.", model, toolkit, print_hint=False)


def make_agent() -> ReActAgent:
    """The serve tests' demo agent with :class:`WebChatModel`, ``brief_task`` and ``janitor``."""
    agent = make_demo_agent()
    toolkit = agent.toolkit
    toolkit.register_tool_function(brief_task)
    toolkit.register_tool(make_janitor().as_tool(description="Tidies up drafts."))
    return ReActAgent(agent.name, agent.sys_prompt, WebChatModel(), toolkit, print_hint=False)


def main() -> None:
    import socket

    import uvicorn

    from agentkit.serve import create_app
    from agentkit.session import SQLiteSession

    port, db, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    app = create_app(make_agent, sessions=SQLiteSession(db), auth_token=token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))  # port 0: the OS picks a free one, printed for the caller
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
