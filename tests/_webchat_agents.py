"""The web chat's browser test agent: the serve tests' demo agent, plus a few scripted answers.

``python -m tests._webchat_agents PORT DB TOKEN`` serves it with uvicorn. On top of the demo
rules (tools, approvals, interrupts) the model answers these prompts itself:

- ``show markdown``: a sample using every markdown element the page renders;
- ``hostile markdown``: links and markup that must stay inert text;
- ``long answer``: about 100 KB of markdown streamed in 5,000 deltas;
- ``fail once ...``: a model connection error the first time, an answer on the retry.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Sequence

import anyio

from agentkit import ReActAgent
from agentkit.cli._demo_model import demo_model
from agentkit.exceptions import ModelConnectionError
from agentkit.messages import Msg
from agentkit.models import ChatModel, ChatResponse, ModelSettings, ToolDefinition
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

    async def request(
        self,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None = None,
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """The whole answer (the last streamed chunk)."""
        last = ChatResponse(content=[])
        async for chunk in self.request_stream(messages, tools, settings):
            last = chunk
        return last

    async def request_stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[ToolDefinition] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[ChatResponse, None]:
        """A scripted answer for the prompts above; the demo model's otherwise."""
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
        elif prompt == "long answer":
            answer, deltas = long_answer(), _LONG_DELTAS
        else:
            async for chunk in self.demo.request_stream(messages, tools, settings):
                yield chunk
            return
        step = max(1, len(answer) // deltas)
        ends = [*range(step, len(answer), step), len(answer)]
        for i, end in enumerate(ends):  # cumulative chunks, as providers stream them
            yield ChatResponse(content=[{"type": "text", "text": answer[:end]}])
            if deltas <= 100 or i % 5 == 4:  # spread over time: many network reads
                await anyio.sleep(0.001 if deltas > 100 else 0.01)


_FAILED: set[str] = set()


def make_agent() -> ReActAgent:
    """The serve tests' demo agent with :class:`WebChatModel`."""
    agent = make_demo_agent()
    return ReActAgent(agent.name, agent.sys_prompt, WebChatModel(), agent.toolkit, print_hint=False)


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
