"""The MCP conformance fixtures, served by agentkit's public API over streamable HTTP.

Run ``python examples/mcp_conformance_server.py --port 3001`` and point the official runner at
it: ``npx @modelcontextprotocol/conformance server --url http://127.0.0.1:3001/mcp --suite all``
(without ``--port`` it serves on a free port, calls itself once with agentkit's client, and
exits).

Every tool, resource and prompt the runner's server scenarios call is here: text, image,
audio and embedded-resource results, log messages and progress from a tool, a tool that asks
the client for sampling or elicitation in the middle of its call, a JSON Schema 2020-12 input
schema, static and templated resources with subscriptions, prompts with arguments, embedded
resources and images, completions, and a tool whose SSE stream is cut and resumed.
"""

from __future__ import annotations

import argparse
import base64
from collections.abc import AsyncIterator
from typing import Any

import anyio

from agentkit.mcp import EmbeddedResource, MCPApp, MCPContext, serve, tool_result
from agentkit.messages import AudioBlock, ImageBlock, Msg
from agentkit.tools import Tool, ToolContext, Toolkit, ToolResponse

PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8"
    "DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
IMAGE = ImageBlock(type="image", source={"type": "base64", "media_type": "image/png", "data": PNG})
AUDIO = AudioBlock(type="audio", source={"type": "base64", "media_type": "audio/wav", "data": WAV})

toolkit = Toolkit()
app = MCPApp(toolkit, name="agentkit-conformance-server")


def mcp_of(ctx: ToolContext) -> MCPContext:
    """The MCP request behind this call (these tools only make sense over MCP)."""
    mcp = MCPContext.of(ctx)
    if mcp is None:
        raise RuntimeError("this tool must be called over MCP")
    return mcp


# -- tools ---------------------------------------------------------------------------------
@toolkit.tool
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@toolkit.tool
def test_image_content() -> ImageBlock:
    """Tests image content response."""
    return IMAGE


@toolkit.tool
def test_audio_content() -> AudioBlock:
    """Tests audio content response."""
    return AUDIO


@toolkit.tool
def test_embedded_resource() -> ToolResponse:
    """Tests embedded resource content response."""
    return tool_result(
        EmbeddedResource(
            "test://embedded-resource",
            text="This is an embedded resource content.",
            mime_type="text/plain",
        )
    )


@toolkit.tool
def test_multiple_content_types() -> ToolResponse:
    """Tests response with multiple content types (text, image, resource)."""
    data = '{"test": "data", "value": 123}'
    resource = EmbeddedResource(
        "test://mixed-content-resource", text=data, mime_type="application/json"
    )
    return tool_result("Multiple content types test:", IMAGE, resource)


@toolkit.tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Tests tool that emits log messages during execution."""
    mcp = mcp_of(ctx)
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await mcp.log("info", text)
        await anyio.sleep(0.05)
    return "Tool with logging executed successfully"


@toolkit.tool
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Tests tool that reports progress notifications."""
    for step in (0, 50, 100):
        await ctx.report_progress(f"Completed step {step} of 100", progress=step, total=100)
        await anyio.sleep(0.05)
    return str(mcp_of(ctx).progress_token)


@toolkit.tool
async def test_sampling(ctx: ToolContext, prompt: str) -> str:
    """Tests server-initiated sampling (LLM completion request).

    Args:
        prompt: The prompt to send to the client's model.
    """
    return f"LLM response: {await mcp_of(ctx).sample(prompt, max_tokens=100)}"


@toolkit.tool
async def test_elicitation(ctx: ToolContext, message: str) -> str:
    """Tests server-initiated elicitation (user input request).

    Args:
        message: The message to show the user.
    """
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await mcp_of(ctx).elicit(message, schema)
    return f"User response: action={answer['action']}, content={answer['content'] or {}}"


DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe", "description": "User name"},
        "age": {"type": "integer", "default": 30, "description": "User age"},
        "score": {"type": "number", "default": 95.5, "description": "User score"},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
            "description": "User status",
        },
        "verified": {"type": "boolean", "default": True, "description": "Verification status"},
    },
}


@toolkit.tool
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)."""
    answer = await mcp_of(ctx).elicit("Please provide user information", DEFAULTS_SCHEMA)
    return f"Elicitation completed: action={answer['action']}, content={answer['content'] or {}}"


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": const, "title": title} for const, title in pairs]


ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
        "titledSingle": {
            "type": "string",
            "oneOf": _titled(
                ("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority")
            ),
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["read", "write", "execute"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": _titled(
                    ("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation")
                )
            },
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    },
    "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
}


@toolkit.tool
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Tests elicitation with enum schema variations per SEP-1330."""
    message = "Please select values using different enum schema types"
    answer = await mcp_of(ctx).elicit(message, ENUMS_SCHEMA)
    return f"Elicitation completed: action={answer['action']}, content={answer['content'] or {}}"


@toolkit.tool
def test_error_handling() -> str:
    """Tests error response handling."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@toolkit.tool
async def test_reconnection(ctx: ToolContext) -> str:
    """Tests SSE polling by closing the stream mid-call (SEP-1699)."""
    mcp = mcp_of(ctx)
    await mcp.log("info", "Before disconnect")
    await mcp.close_sse_stream()
    await anyio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
    await mcp.log("info", "After reconnect")
    return "Reconnection test completed"


class JsonSchema202012Tool(Tool):
    """A tool whose input schema uses JSON Schema 2020-12 keywords (SEP-1613)."""

    def __init__(self) -> None:
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        }
        super().__init__(
            "json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", schema
        )

    async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
        """Echo the arguments."""
        yield ToolResponse.text(f"received {sorted(arguments)}")


toolkit.register_tool(JsonSchema202012Tool())


class CustomHeadersTool(Tool):
    """A tool whose arguments are mirrored in ``Mcp-Param-*`` HTTP headers (SEP-2243).

    The ``x-mcp-header`` keyword names the header; the SDK's transport checks each header
    against the body's argument (Base64 sentinel decoded) and refuses a mismatch with 400.
    """

    def __init__(self) -> None:
        schema = {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "query": {"type": "string"},
            },
            "required": ["region"],
        }
        super().__init__("test_custom_headers", "Routes by the Mcp-Param-Region header", schema)

    async def invoke(self, arguments: dict[str, Any]) -> AsyncIterator[ToolResponse]:
        """Echo the routed region."""
        yield ToolResponse.text(f"region={arguments.get('region')}")


toolkit.register_tool(CustomHeadersTool())


# -- 2026-07-28: input-required rounds (SEP-2322) and stateless diagnostics (SEP-2575) ----
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@toolkit.tool
async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    """Asks the user's name in an input-required round, then greets them."""
    answer = await mcp_of(ctx).elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer['content'] or {}).get('name')}!"  # type: ignore[union-attr]


@toolkit.tool
async def test_input_required_result_sampling(ctx: ToolContext) -> str:
    """Asks the client's model a question in an input-required round."""
    text = await mcp_of(ctx).sample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )
    return f"LLM response: {text}"


@toolkit.tool
async def test_input_required_result_list_roots(ctx: ToolContext) -> str:
    """Asks for the client's roots in an input-required round."""
    roots = await mcp_of(ctx).list_roots(key="client_roots")
    return f"Client roots: {', '.join(str(r['uri']) for r in roots) or 'none'}"


@toolkit.tool
async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    """Asks for a confirmation; the answer arrives with the sealed requestState."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await mcp_of(ctx).elicit("Please confirm", schema, key="confirm")
    return f"state-ok: confirmed={answer['content']}"


@toolkit.tool
async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    """Asks for a confirmation; a tampered requestState is refused (the SDK seals it)."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await mcp_of(ctx).elicit("Please confirm", schema, key="confirm")
    return f"confirmed={answer['content']}"


@toolkit.tool
async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> str:
    """Asks three questions of three kinds in one input-required round."""
    mcp = mcp_of(ctx)
    answers = await mcp.gather(
        {
            "user_name": mcp.elicit("What is your name?", NAME_SCHEMA),
            "greeting": mcp.sample("Generate a greeting", max_tokens=50),
            "client_roots": mcp.list_roots(),
        }
    )
    return f"all answered: {sorted(answers)}"


@toolkit.tool
async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    """Asks two questions in two rounds (the second only once the first is answered)."""
    mcp = mcp_of(ctx)
    name = await mcp.elicit("Step 1: What is your name?", NAME_SCHEMA, key="step1")
    color_schema = {
        "type": "object",
        "properties": {"color": {"type": "string"}},
        "required": ["color"],
    }
    color = await mcp.elicit("Step 2: What is your favorite color?", color_schema, key="step2")
    return f"name={name['content']}, color={color['content']}"


@toolkit.tool
async def test_input_required_result_capabilities(ctx: ToolContext) -> str:
    """Asks only what the client declared it can answer (its per-request capabilities)."""
    mcp = mcp_of(ctx)
    declared = mcp.client_capabilities
    questions: dict[str, Any] = {}
    if "elicitation" in declared:
        questions["user_name"] = mcp.elicit("What is your name?", NAME_SCHEMA)
    if "sampling" in declared:
        questions["greeting"] = mcp.sample("Generate a greeting", max_tokens=50)
    if "roots" in declared:
        questions["client_roots"] = mcp.list_roots()
    answers = await mcp.gather(questions)
    return f"answered: {sorted(answers)}"


@toolkit.tool
async def test_missing_capability(ctx: ToolContext) -> str:
    """Needs sampling: a client that did not declare it gets -32021 (SEP-2575)."""
    return await mcp_of(ctx).sample("Say hello", max_tokens=20)


@toolkit.tool
async def test_streaming_elicitation(ctx: ToolContext) -> str:
    """Asks the user mid-call: in 2026-07-28 an input-required result, never a request."""
    answer = await mcp_of(ctx).elicit("What is your name?", NAME_SCHEMA)
    return f"Hello, {answer['content']}"


@toolkit.tool
async def test_logging_tool(ctx: ToolContext) -> str:
    """Logs; sent only when the request carried a log level (SEP-2575)."""
    await mcp_of(ctx).log("info", "test_logging_tool ran")
    return "logged"


def dynamic_tool() -> str:
    """A tool whose description test_trigger_tool_change rewrites."""
    return "dynamic"


def dynamic_prompt() -> str:
    """A prompt whose description test_trigger_prompt_change rewrites."""
    return "dynamic"


toolkit.register_tool_function(dynamic_tool, name="test_dynamic_tool")
app.prompt("test_dynamic_prompt")(dynamic_prompt)
changes = {"tools": 0, "prompts": 0}


@toolkit.tool
async def test_trigger_tool_change() -> str:
    """Changes a tool's definition live: listen streams get tools/list_changed (SEP-2575)."""
    changes["tools"] += 1
    toolkit.remove_tools(["test_dynamic_tool"])
    description = f"A tool changed {changes['tools']} times."
    toolkit.register_tool_function(dynamic_tool, name="test_dynamic_tool", description=description)
    await app.notify_list_changed("tools")
    return description


@toolkit.tool
async def test_trigger_prompt_change() -> str:
    """Changes a prompt live: listen streams get prompts/list_changed (SEP-2575)."""
    changes["prompts"] += 1
    description = f"A prompt changed {changes['prompts']} times."
    app.prompt("test_dynamic_prompt", description=description)(dynamic_prompt)
    await app.notify_list_changed("prompts")
    return description


# -- resources -----------------------------------------------------------------------------
# -- tasks (SEP-2663 on 2026-07-28, SEP-1686 on 2025-11-25) ---------------------------------
@toolkit.tool
def greet(name: str) -> str:
    """A plain tool (never a task)."""
    return f"Hello, {name}!"


@app.tool(task="optional")
async def slow_compute(seconds: float, label: str = "") -> str:
    """Sleep ``seconds``, then answer (as a task when the client takes tasks)."""
    await anyio.sleep(seconds)
    return f"computed {label} after {seconds}s"


@app.tool(task="required")
async def failing_job() -> ToolResponse:
    """A task whose tool reports an error once it has run a moment.

    The runner's fixture note says "after ~1s"; its check only needs the task to end in a
    tool error, and it polls every 200 ms, so a second here would only make the run longer.
    """
    await anyio.sleep(0.1)
    return ToolResponse.error("the job failed")


@app.tool(task="required")
async def protocol_error_job(ctx: ToolContext) -> str:
    """A task whose call fails at the protocol level.

    It needs the client's roots, which the runner's client does not declare: a missing
    capability is a protocol error (-32021), not a tool error.
    """
    roots = await mcp_of(ctx).list_roots(key="roots")
    return f"{len(roots)} roots"


CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}


@app.tool(task="required")
async def confirm_delete(ctx: ToolContext, filename: str = "") -> str:
    """A task that asks the client to confirm (the task waits in input_required)."""
    answer = await mcp_of(ctx).elicit(f"Delete {filename}?", CONFIRM_SCHEMA, key="confirm")
    return f"delete {filename}: {answer}"


@app.tool(task="required")
async def multi_input(ctx: ToolContext) -> str:
    """A task that asks two questions at once."""
    mcp = mcp_of(ctx)
    answers = await mcp.gather(
        {
            "name": mcp.elicit("What is your name?", NAME_SCHEMA),
            "confirm": mcp.elicit("Are you sure?", CONFIRM_SCHEMA),
        }
    )
    return f"answered: {sorted(answers)}"


@app.tool(task="after_input")
async def test_tool_with_task(ctx: ToolContext) -> str:
    """Asks the user's name as a synchronous input round, then runs on as a task."""
    answer = await mcp_of(ctx).elicit("What is your name?", NAME_SCHEMA, key="user_name")
    await anyio.sleep(0.2)  # the work the call became a task for
    content = answer["content"]
    return f"Hello, {content.get('name') if isinstance(content, dict) else None}!"


@app.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing."""
    return base64.b64decode(PNG)


@app.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template with parameter substitution."""
    return f'{{"id": "{id}", "templateTest": true, "data": "Data for ID: {id}"}}'


@app.resource("test://watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource that can be subscribed to for updates."""
    return "Watched resource content"


# -- prompts and completions ---------------------------------------------------------------
@app.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
    """A prompt that includes an embedded resource."""
    text = "Embedded resource content for testing."
    resource = EmbeddedResource(resourceUri, text=text, mime_type="text/plain")
    return [resource, "Please process the embedded resource above."]


@app.prompt()
def test_prompt_with_image() -> list[Any]:
    """A prompt that includes image content."""
    return [Msg("user", [IMAGE], role="user"), "Please analyze the image above."]


@app.prompt()
async def test_input_required_result_prompt() -> str:
    """A prompt that asks the user for its context first (an input-required round)."""
    mcp = MCPContext.of()
    if mcp is None:
        raise RuntimeError("this prompt must be got over MCP")
    schema = {
        "type": "object",
        "properties": {"context": {"type": "string"}},
        "required": ["context"],
    }
    answer = await mcp.elicit("What context should the prompt use?", schema, key="user_context")
    return f"Use this context: {(answer['content'] or {}).get('context')}"  # type: ignore[union-attr]


@app.completion()
def complete(
    kind: str, target: str, argument: str, value: str, context: dict[str, str]
) -> list[str]:
    """No suggestions (the runner checks the shape of the answer)."""
    return []


async def self_check() -> None:
    """Without ``--port``: serve on a free port, list and call through agentkit's client."""
    import socket

    from agentkit.mcp import HttpServer, MCPClient

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(app, "streamable_http", port=port))
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(200):  # until uvicorn listens
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                break
            except OSError:
                await anyio.sleep(0.05)
        async with MCPClient("conformance", HttpServer(url)) as client:
            tools = await client.list_tools()
            reply = await client.call_tool("test_simple_text")
            resources = await client.list_resources()
            print(f"{len(tools)} tools, {len(resources)} resources; {reply.get_text()}")
        tg.cancel_scope.cancel()


def main() -> None:
    """Serve on 127.0.0.1 until interrupted (``--port``), or run a quick self-check."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=None, help="serve on this port")
    args = parser.parse_args()
    if args.port is None:
        anyio.run(self_check)
        return
    anyio.run(lambda: serve(app, "streamable_http", port=args.port, retry_interval_ms=100))


if __name__ == "__main__":
    main()
