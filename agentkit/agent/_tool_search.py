"""``ToolSearch``: offer the model a search over the tools instead of all their definitions.

With many MCP servers the tool definitions are most of every request. With this capability
each request offers only ``search_tools`` (plus an always-on set); the model searches, and
the tools found are *loaded*: their definitions come back as the search tool's result, in
the message stream, and the model calls them by name from then on (the Toolkit runs them as
usual, approvals and pins included).

Where the provider has tool search of its own (the Claude API), the request carries the
other tools as ``ModelRequest.deferred``: the adapter sends them all with
``defer_loading: true`` (the same list on every request) and turns each search result into
``tool_reference`` blocks, which the API resolves to the definitions at that place in the
conversation. Elsewhere the result's text is the definitions.

Why the message stream and not the request's ``tools`` list: providers cache a request's
prefix (tools first, then system, then messages). Adding a definition to ``tools`` changes
the start of every later request and so throws the cached prefix away; appending it as a
tool result leaves everything before it byte-identical. What is loaded is read back from the
conversation itself (the earlier ``search_tools`` results), so it stays loaded for the whole
conversation, a saved and restored session included, and is unloaded only if compaction
drops that result (and with it the definitions the model was shown).

Ranking is BM25 (the ``bm25s`` package, extra ``agentkit[search]``) over each tool's name
(split at ``_``, ``-``, ``.`` and camel case), description and parameter names and
descriptions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentkit.agent._capabilities import Capability
from agentkit.agent._structured import RESPONSE_TOOL
from agentkit.exceptions import UsageError
from agentkit.messages import Msg, ToolUseBlock
from agentkit.models._base import DeferredTools, ModelRequest, ToolDefinition
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.tools._context import RunContext, ToolContext

__all__ = ["ToolIndex", "ToolSearch", "loaded_tool_names", "tool_loads"]

_SEARCH_PARAMETERS: dict[str, object] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "What the tool should do, in a few keywords "
            "(e.g. 'create github issue', 'read file').",
        }
    },
    "required": ["query"],
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[_\-./:]+")


def _tool_text(definition: ToolDefinition) -> str:
    """The text a tool is found by: its name in words, description, parameters."""
    name = _SEPARATORS.sub(" ", _CAMEL.sub(" ", definition.name))
    parts = [name, name, definition.description]  # the name weighs twice: it is the summary
    properties = definition.parameters.get("properties")
    if isinstance(properties, Mapping):
        for param, schema in properties.items():
            parts.append(_SEPARATORS.sub(" ", _CAMEL.sub(" ", str(param))))
            if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
                parts.append(str(schema["description"]))
    return " ".join(parts)


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    tokens: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", return_ids=False, show_progress=False
    )
    return tokens


class ToolIndex:
    """A BM25 index over tool definitions.

    Args:
        definitions: The tools to search (names must be unique).

    Raises:
        UsageError: ``bm25s`` is not installed (``pip install 'agentkit[search]'``).
    """

    def __init__(self, definitions: Sequence[ToolDefinition]) -> None:
        try:
            import bm25s
        except ImportError:  # pragma: no cover - the dev extra installs it
            raise UsageError(
                "ToolSearch ranks tools with the bm25s package: pip install 'agentkit[search]'"
            ) from None
        self.definitions = list(definitions)
        self._retriever: Any = None
        if self.definitions:
            self._retriever = bm25s.BM25()
            corpus = _tokenize([_tool_text(d) for d in self.definitions])
            self._retriever.index(corpus, show_progress=False)

    def search(self, query: str, limit: int = 5) -> list[ToolDefinition]:
        """The best ``limit`` tools for ``query``, best first (only tools that match)."""
        if self._retriever is None or limit < 1:
            return []
        tokens = _tokenize([query])
        if not tokens[0]:
            return []
        k = min(limit, len(self.definitions))
        found, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [
            self.definitions[int(i)]
            for i, score in zip(found[0], scores[0], strict=True)
            if float(score) > 0
        ]


def _result_output(block: Mapping[str, Any]) -> str | None:
    output = block.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(b.get("text", "") for b in output if isinstance(b, Mapping))
    return None


def loaded_tool_names(messages: Iterable[Msg], search_tool: str = "search_tools") -> set[str]:
    """The tools that earlier ``search_tool`` results in ``messages`` loaded."""
    return {name for names in tool_loads(messages, search_tool).values() for name in names}


def tool_loads(
    messages: Iterable[Msg], search_tool: str = "search_tools"
) -> dict[str, tuple[str, ...]]:
    """Each ``search_tool`` result in ``messages`` (by id) -> the tools it loaded, in order."""
    loads: dict[str, tuple[str, ...]] = {}
    for msg in messages:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if block["type"] != "tool_result" or block.get("name") != search_tool:
                continue
            if block.get("is_error"):
                continue
            text = _result_output(block)
            try:
                data = json.loads(text) if text else None
            except ValueError:
                continue
            tools = data.get("loaded_tools") if isinstance(data, dict) else None
            names = tuple(
                tool["name"]
                for tool in (tools if isinstance(tools, list) else [])
                if isinstance(tool, dict) and isinstance(tool.get("name"), str)
            )
            if names:
                loads[block["id"]] = names
    return loads


class ToolSearch(Capability[Any]):
    """Offer ``search_tools`` instead of every tool; the tools found are loaded for good.

    Each model request offers the search tool, the ``always`` tools and (with structured
    output) the response tool, always in the same order, so the request's ``tools`` never
    change during a conversation. A search answers with the matching tools' names,
    descriptions and parameter schemas; the model then calls them by name. A call to a tool
    that no search has loaded yet is answered with an error telling the model to search.

    Args:
        always: Names of tools offered on every request (searchable too).
        max_results: How many tools one search loads at most.
        name: The search tool's name.

    Example:
        >>> agent = ReActAgent("a", "sys", model, toolkit, capabilities=[ToolSearch()])
    """

    def __init__(
        self, *, always: Iterable[str] = (), max_results: int = 5, name: str = "search_tools"
    ) -> None:
        if max_results < 1:
            raise UsageError(f"ToolSearch(max_results=...) must be positive, not {max_results}")
        self.always = frozenset([always] if isinstance(always, str) else always)
        self.max_results = max_results
        self.name = name
        self.definition = ToolDefinition(
            name,
            "Find and load the tools you need. Only a few tools are offered directly; many "
            "more exist. Describe the action in a few keywords; the best matching tools are "
            "returned with their parameters, and you can call them by name from then on. "
            "Search again with other words if none fits.",
            _SEARCH_PARAMETERS,
        )
        # (names and descriptions of the searchable tools) -> their index: rebuilt only when
        # the toolkit's tools change (an MCP server's list_changed, a group switched).
        self._index: tuple[tuple[tuple[str, str], ...], ToolIndex] | None = None

    def index(self, definitions: Sequence[ToolDefinition]) -> ToolIndex:
        """The index over ``definitions`` (built once per set of tools)."""
        key = tuple((d.name, d.description) for d in definitions)
        if self._index is None or self._index[0] != key:
            self._index = (key, ToolIndex(definitions))
        return self._index[1]

    def _searchable(self, definitions: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        return [d for d in definitions if d.name not in (self.name, RESPONSE_TOOL)]

    def offered(self, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        """The tools one request offers, out of all the active ``tools``."""
        kept = [t for t in tools if t.name in self.always or t.name == RESPONSE_TOOL]
        return [self.definition, *kept]

    async def before_model(self, ctx: RunContext[Any], request: ModelRequest) -> ModelRequest:
        """Offer the search tool and the always-on tools; the others go as ``deferred``.

        An adapter with native tool search (Anthropic) sends the deferred tools marked
        deferred and the loads as references to them; the others leave ``deferred`` out and
        the search results' text carries the definitions.
        """
        offered = self.offered(request.tools)
        names = {t.name for t in offered}
        deferred = DeferredTools(
            tools=tuple(t for t in self._searchable(request.tools) if t.name not in names),
            loads=tool_loads(request.messages, self.name),
            search_tool=self.name,
        )
        return replace(request, tools=offered, deferred=deferred)

    async def before_tool(
        self, ctx: ToolContext[Any], call: ToolUseBlock
    ) -> ToolUseBlock | ToolResponse:
        """Answer searches; refuse calls to tools no search has loaded."""
        toolkit = ctx.toolkit
        if call["name"] == self.name:
            query = call["input"].get("query") if isinstance(call["input"], dict) else None
            if not isinstance(query, str) or not query.strip():
                return ToolResponse.error("search_tools needs a non-empty 'query' string.")
            definitions = toolkit.get_tool_definitions() if toolkit is not None else []
            found = self.index(self._searchable(definitions)).search(query, self.max_results)
            return ToolResponse.text(self._answer(query, found))
        if call["name"] in self.always or toolkit is None:
            return call
        if toolkit.get_tool(call["name"]) is None:
            return call  # unknown tools get the Toolkit's own error
        if call["name"] in loaded_tool_names(await ctx.memory.get_memory(), self.name):
            return call
        return ToolResponse.error(
            f"The tool {call['name']!r} is not loaded. Call {self.name} first to find the tool "
            "you need and see its parameters."
        )

    def _answer(self, query: str, found: list[ToolDefinition]) -> str:
        payload: dict[str, object] = {
            "query": query,
            "loaded_tools": [
                {"name": d.name, "description": d.description, "parameters": dict(d.parameters)}
                for d in found
            ],
            "note": (
                "These tools are loaded: call them by name with arguments that match "
                "their parameters."
                if found
                else "No tool matched; try other keywords."
            ),
        }
        return json.dumps(payload, ensure_ascii=False, sort_keys=True)
