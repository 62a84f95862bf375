"""``agentkit mcp list|tools|call|login|logout``: inspect and try any MCP server.

Examples::

    agentkit mcp list  --stdio "node server-everything/dist/index.js stdio"
    agentkit mcp tools --http http://127.0.0.1:8000/mcp
    agentkit mcp call get-sum '{"a": 2, "b": 3}' --stdio "node .../index.js stdio"
    agentkit mcp login https://mcp.example.com/mcp     # OAuth in the browser, tokens stored
    agentkit mcp tools --http https://mcp.example.com/mcp --oauth
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from agentkit._text import progress_counter, terminal_safe
from agentkit.cli._mcp_login import add_login_parsers, run_login
from agentkit.cli._setup import mcp_server, open_mcp, server_name, sse_hint
from agentkit.exceptions import AgentkitError

if TYPE_CHECKING:
    from agentkit.mcp import MCPClient

__all__ = ["add_arguments", "run"]


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stdio", metavar="CMD", help='server command line, "CMD ARGS"')
    where.add_argument("--http", metavar="URL", help="streamable HTTP (or --sse) endpoint")
    parser.add_argument("--sse", action="store_true", help="use the legacy SSE transport")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="stdio server env"
    )
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="HTTP header"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")
    parser.add_argument(
        "--oauth", action="store_true", help="HTTP: use (or run) the `agentkit mcp login` OAuth"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``mcp`` sub-commands to ``parser``."""
    sub = parser.add_subparsers(
        dest="mcp_command", required=True, metavar="{list,tools,call,login,logout}"
    )
    listing = sub.add_parser("list", help="server info, capabilities, resources, prompts")
    _add_server_options(listing)
    tools = sub.add_parser("tools", help="list the server's tools with their input schemas")
    _add_server_options(tools)
    call = sub.add_parser("call", help="call one tool and print its result")
    call.add_argument("tool", help="the tool's name")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    _add_server_options(call)
    add_login_parsers(sub)


def _pairs(items: list[str], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise ValueError(f"{what} must look like NAME{sep}VALUE, got {item!r}")
        out[key.strip()] = value.strip() if sep == ":" else value
    return out


def run(args: argparse.Namespace) -> int:
    """Run an ``mcp`` sub-command; return the exit status."""
    if args.mcp_command in ("login", "logout"):
        return run_login(args)
    try:
        config = mcp_server(
            args.stdio,
            args.http,
            sse=args.sse,
            env=_pairs(args.env, "=", "--env"),
            headers=_pairs(args.header, ":", "--header"),
        )
        if args.oauth:
            from agentkit.mcp import HttpServer, OAuth

            if not isinstance(config, HttpServer):
                raise ValueError("--oauth needs an --http server")
            config = dataclasses.replace(config, oauth=OAuth())
        arguments: dict[str, object] = {}
        if args.mcp_command == "call":
            arguments = json.loads(args.arguments)
            if not isinstance(arguments, dict):
                raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        _print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return anyio.run(_main, args, config, arguments, backend="asyncio")
    except AgentkitError as exc:
        _print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        hint = sse_hint(config)
        if hint is not None:
            _print(f"hint: {hint}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace, config: Any, arguments: dict[str, object]) -> int:
    async with AsyncExitStack() as stack:
        client = await open_mcp(stack, server_name(config), config)
        client.timeout = args.timeout
        if args.mcp_command == "list":
            return await _list(client, args.json)
        if args.mcp_command == "tools":
            return await _tools(client, args.json)
        return await _call(client, args.tool, arguments, args.json)
    raise AssertionError("unreachable")  # pragma: no cover


def _dump(value: Any) -> Any:
    """A pydantic SDK object (or anything) as JSON-safe data."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _server_details(client: MCPClient) -> dict[str, Any]:
    info = client.server_info
    capabilities = client.server_capabilities
    return {
        "server": _dump(info) if info is not None else None,
        "protocol_version": client.protocol_version,
        "capabilities": _dump(capabilities) if capabilities is not None else None,
        "instructions": client.instructions,
    }


async def _optional(fn: Any) -> list[Any]:
    """A listing the server may not support: an empty list then."""
    try:
        return list(await fn())
    except AgentkitError:
        raise
    except Exception:  # the SDK raises its own MCPError for "method not found"
        return []


async def _list(client: MCPClient, as_json: bool) -> int:
    details = _server_details(client)
    caps = details["capabilities"] or {}
    details["tools"] = [t.name for t in await client.list_tools()] if "tools" in caps else []
    resources = await _optional(client.list_resources) if "resources" in caps else []
    templates = await _optional(client.list_resource_templates) if "resources" in caps else []
    prompts = await _optional(client.list_prompts) if "prompts" in caps else []
    details["resources"] = [_dump(r) for r in resources]
    details["resource_templates"] = [_dump(t) for t in templates]
    details["prompts"] = [_dump(p) for p in prompts]
    if as_json:
        _print_json(details)
        return 0
    server = details["server"] or {}
    _print(f"server: {server.get('name', '?')} {server.get('version', '')}".rstrip())
    _print(f"protocol: {details['protocol_version']}")
    _print(f"capabilities: {', '.join(sorted(caps)) or 'none'}")
    if details["instructions"]:
        text = " ".join(details["instructions"].split())
        _print(f"instructions: {text[:300]}{'…' if len(text) > 300 else ''}")
    _print(f"tools ({len(details['tools'])}): {', '.join(details['tools'])}")
    _print(f"resources ({len(resources)}):")
    for r in details["resources"]:
        _print(f"  {r['uri']}  {r.get('name', '')}")
    _print(f"resource templates ({len(templates)}):")
    for t in details["resource_templates"]:
        _print(f"  {t['uriTemplate']}  {t.get('name', '')}")
    _print(f"prompts ({len(prompts)}):")
    for p in details["prompts"]:
        names = ", ".join(
            a["name"] + ("" if a.get("required") else "?") for a in p.get("arguments", [])
        )
        _print(f"  {p['name']}({names})  {p.get('description', '')}")
    return 0


async def _tools(client: MCPClient, as_json: bool) -> int:
    tools = [_dump(t) for t in await client.list_tools()]
    if as_json:
        _print_json(tools)
        return 0
    for tool in tools:
        _print(f"{tool['name']}: {' '.join((tool.get('description') or '').split())}")
        schema = json.dumps(tool.get("inputSchema", {}), indent=2, ensure_ascii=False)
        _print("  input schema: " + schema.replace("\n", "\n  "))
        _print()
    _print(f"{len(tools)} tools")
    return 0


async def _call(client: MCPClient, tool: str, arguments: dict[str, object], as_json: bool) -> int:
    final = None
    async for chunk in client.call_tool_stream(tool, arguments):
        if not chunk.is_last:
            # The chunk's text already says "progress 1/2" (or the server's message with it).
            shown = chunk.get_text() or f"progress {progress_counter(chunk.metadata)}".rstrip()
            _print(shown, file=sys.stderr)
        else:
            final = chunk
    if final is None:
        _print("error: no result", file=sys.stderr)
        return 1
    if as_json:
        payload = {"content": final.content, "metadata": final.metadata, "is_error": final.is_error}
        _print_json(payload)
    else:
        for block in final.content:
            if block["type"] == "text":
                _print(block["text"])
            else:
                source = block["source"]
                kind = source.get("media_type") or source.get("url", "")
                _print(f"[{block['type']} {kind}]")
        structured = (final.metadata or {}).get("structured_content")
        if structured is not None and not final.get_text().startswith("{"):
            _print("structured content: " + json.dumps(structured, ensure_ascii=False))
    return 1 if final.is_error else 0


def _print(text: str = "", *, file: TextIO | None = None) -> None:
    """Print text that came from a server, with its control sequences neutralized."""
    print(terminal_safe(text), file=file or sys.stdout)


def _print_json(value: object) -> None:
    """Print JSON with every non-ASCII character escaped: no control sequence gets through."""
    print(json.dumps(value, indent=2, ensure_ascii=True))
