"""Context compaction: keep every model request under a token budget.

The agent's memory keeps the whole conversation; only the *request view* (what is sent to
the model) is compacted. When the view would exceed the budget, its oldest messages are
left out, from a cut point that never separates a ``tool_use`` from its ``tool_result``,
and the strategy may summarize what was left out (the summary joins the system prompt,
which always comes first).

Each decision is recorded in the metadata of the assistant message the request produced
(``metadata["compaction"]``: where the view starts, the summary when a new one was made,
and the provider's token counts). The next request starts from the latest record, so the
view only ever moves forward, and a session saved with ``state_dict()`` and loaded
elsewhere compacts exactly the same way: nothing is recomputed that was recorded.

Token counts: the provider's usage of the previous request (input plus output tokens) plus
an estimate for the messages added since (about 4 characters per token, scaled by how far
the previous estimate was from the provider's count). No tokenizer is downloaded.

The ``Compactor`` is a capability: give it to the agent, and every run (of the agent and
of its copies) compacts its requests in ``before_model`` and records the decision in
``after_model``; each run gets a view of its own (``for_run``)::

    compactor = Compactor(32_000, strategy=Summarize(cheap_model))
    agent = ReActAgent("a", "sys", model, capabilities=[compactor])
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import agentkit._seams as seams
from agentkit.agent._capabilities import MESSAGE_METADATA, Capability, spent
from agentkit.exceptions import ContextWindowError
from agentkit.messages import Msg
from agentkit.models._base import ChatResponse, ModelRequest
from agentkit.tools._context import DepsT

if TYPE_CHECKING:
    from agentkit.models._base import ChatModel
    from agentkit.tools._context import ModelView, RunContext

__all__ = [
    "CompactionStrategy",
    "Compactor",
    "DropOldest",
    "Summarize",
    "context_window",
    "estimate_tokens",
]

logger = logging.getLogger("agentkit.agent")

RECORD_KEY = "compaction"
OMITTED_NOTE = "[Earlier messages of this conversation were left out to fit the context window.]"
SUMMARY_HEADER = "Summary of the earlier part of this conversation (left out of the messages):"
_PER_MESSAGE = 4  # tokens of role/formatting overhead per message
_CHARS_PER_TOKEN = 4.0
_MARGIN = 1.05  # estimates are rough: leave a little room

# Context windows (tokens) of well-known models, by name prefix; the longest match wins.
# Override with ``Compactor(context_window=...)`` for anything else or newer.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-3": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
}


def context_window(model: ModelView) -> int | None:
    """The context window of ``model`` from :data:`KNOWN_WINDOWS` (None when unknown).

    A ``FallbackModel`` has the smallest window of its models (every one must fit).
    """
    models = getattr(model, "models", None)
    if isinstance(models, list) and models:
        windows = [context_window(m) for m in models]
        known = [w for w in windows if w is not None]
        return min(known) if len(known) == len(windows) else None
    name = str(getattr(model, "model_name", ""))
    matches = [p for p in KNOWN_WINDOWS if name.startswith(p)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else None


def estimate_tokens(msg: Msg) -> int:
    """A tokenizer-free estimate of one message's tokens (about 4 characters each).

    Images and audio are counted as providers bill them, not as the text of their base64
    data (which would make one screenshot look like a hundred thousand tokens).
    """
    content = msg.content
    if isinstance(content, str):
        return _PER_MESSAGE + math.ceil(len(content) / _CHARS_PER_TOKEN)
    return _PER_MESSAGE + _blocks_tokens(content)


# What providers bill for media, in tokens: an image is resized to about a megapixel (OpenAI
# bills at most ~1100 tokens, Anthropic ~1600); audio is ~10-32 tokens a second, about one
# token per KB of a 16 kHz clip; a clip given by URL is of unknown length.
_IMAGE_TOKENS = 1600
_AUDIO_BYTES_PER_TOKEN = 1000
_AUDIO_URL_TOKENS = 1600


def _blocks_tokens(blocks: Sequence[object]) -> int:
    """Tokens of a list of content blocks (tool results' block outputs included)."""
    text_size, media = 0, 0
    for block in blocks:
        if not isinstance(block, dict):
            text_size += len(json.dumps(block, ensure_ascii=False, default=str))
            continue
        kind = block.get("type")
        if kind == "image":
            media += _IMAGE_TOKENS
        elif kind == "audio":
            source = block.get("source") or {}
            data = source.get("data") if isinstance(source, dict) else None
            media += (
                max(50, math.ceil(len(data) * 3 / 4 / _AUDIO_BYTES_PER_TOKEN))
                if isinstance(data, str)
                else _AUDIO_URL_TOKENS
            ) + math.ceil(len(str(block.get("transcript", ""))) / _CHARS_PER_TOKEN)
        elif kind == "tool_result" and isinstance(block.get("output"), list):
            media += _blocks_tokens(block["output"])
            rest = {k: v for k, v in block.items() if k != "output"}
            text_size += len(json.dumps(rest, ensure_ascii=False, default=str))
        else:
            text_size += len(json.dumps(block, ensure_ascii=False, default=str))
    return media + math.ceil(text_size / _CHARS_PER_TOKEN)


class CompactionStrategy(Protocol):
    """What happens to the messages a compaction leaves out of the view."""

    summary_tokens: int
    """Room the strategy's summary may take in the view (0: no summary)."""

    async def summarize(self, left_out: list[Msg], previous: str | None) -> str | None:
        """A summary of ``left_out`` (following ``previous``), or None for no summary."""
        ...


class DropOldest:
    """Leave the oldest messages out, without a summary."""

    summary_tokens = 0

    async def summarize(self, left_out: list[Msg], previous: str | None) -> str | None:
        """No summary: what was left out is gone from the view."""
        return None


_SUMMARY_PROMPT = (
    "You compress conversations. Summarize the conversation below for the assistant who will "
    "continue it: keep facts, decisions, names, numbers, file paths, open tasks and what the "
    "tools returned that still matters. Be concise; at most {words} words. Answer with the "
    "summary only."
)


def _render(msg: Msg, limit: int = 2000) -> str:
    """One message as plain text for the summarizer."""
    if isinstance(msg.content, str):
        return f"{msg.role} ({msg.name}): {msg.content[:limit]}"
    parts = []
    for block in msg.content:
        if block["type"] == "text":
            parts.append(block["text"][:limit])
        elif block["type"] == "tool_use":
            args = json.dumps(block["input"], ensure_ascii=False)[:limit]
            parts.append(f"[called {block['name']}({args})]")
        elif block["type"] == "tool_result":
            output = json.dumps(block["output"], ensure_ascii=False, default=str)[:limit]
            parts.append(f"[{block['name']} returned: {output}]")
    return f"{msg.role} ({msg.name}): " + " ".join(parts)


@dataclass
class Summarize:
    """Summarize what is left out with ``model`` (a cheaper model works well).

    When the model fails (an outage, a rate limit), that part is left out without a
    summary (a WARNING on the ``agentkit.agent`` logger) and the earlier summary stays:
    the agent keeps answering.

    Args:
        model: The model that writes the summary (non-streaming or streaming).
        summary_tokens: The summary's share of the view, in tokens.
        prompt: The summarizer's instructions (``{words}`` is replaced by a word limit).
    """

    model: ChatModel
    summary_tokens: int = 1000
    prompt: str = _SUMMARY_PROMPT

    async def summarize(self, left_out: list[Msg], previous: str | None) -> str | None:
        """Ask the model for a summary of ``previous`` plus ``left_out``."""
        lines = [f"Earlier summary: {previous}"] if previous else []
        lines += [_render(m) for m in left_out]
        words = max(20, int(self.summary_tokens * 0.7))
        request = [
            Msg("system", self.prompt.format(words=words), "system"),
            Msg("user", "\n".join(lines), "user"),
        ]
        final = await self.model.request(ModelRequest(request))  # the whole answer
        spent(final)
        text = final.get_text().strip()
        # Never let a runaway summary break the budget it is meant to protect.
        return text[: int(self.summary_tokens * _CHARS_PER_TOKEN)] or None


@dataclass
class _View:
    """One request's compaction decision, recorded on the answer."""

    start: str | None  # id of the first history message in the view (None: from the start)
    summary: str | None
    new_summary: bool
    estimate: int


@dataclass
class Compactor(Capability[DepsT]):
    """Keeps an agent's requests under a token budget (see the module docs).

    A capability: ``ReActAgent(..., capabilities=[Compactor(...)])``. The compactor is
    configuration (shared by the agent's copies, with its caches of estimates and
    summaries, both keyed by message ids); each run compacts through a view of its own.

    Args:
        context_window: The model's context window in tokens (None: look it up in
            :data:`KNOWN_WINDOWS` by model name; unknown models then raise ValueError).
        strategy: :class:`DropOldest` (default) or :class:`Summarize`, or your own.
        reserve_output: Tokens kept free for the answer (budget = window - reserve).
        target: After a compaction the view is at most this fraction of the budget, so
            compactions (and summaries) happen once in a while, not at every turn.
    """

    context_window: int | None = None
    strategy: CompactionStrategy = field(default_factory=DropOldest)
    reserve_output: int = 4096
    target: float = 0.6
    _estimates: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _summaries: dict[tuple[str | None, str], str | None] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if not 0.1 <= self.target <= 1.0:
            raise ValueError("target must be between 0.1 and 1.0")
        if self.context_window is not None and self.context_window <= self.reserve_output:
            raise ValueError("context_window must be larger than reserve_output")

    def for_run(self, ctx: RunContext[DepsT]) -> Capability[DepsT]:
        """A view of its own for one run: the request's decision, until its answer."""
        return _CompactingRun(self)

    def budget(self, model: ModelView | None) -> int:
        """Input tokens a request may use with ``model``."""
        window = self.context_window or (None if model is None else context_window(model))
        if window is None:
            raise ValueError(
                f"the context window of {getattr(model, 'model_name', model)!r} is unknown: "
                "pass Compactor(context_window=...)"
            )
        return window - self.reserve_output

    def estimate(self, msg: Msg) -> int:
        """Estimated tokens of ``msg`` (cached by message id)."""
        value = self._estimates.get(msg.id)
        if value is None:
            value = self._estimates[msg.id] = estimate_tokens(msg)
        return value

    async def summary(
        self, history: list[Msg], start: int, cut: int, previous: str | None
    ) -> str | None:
        """The strategy's summary of ``history[start:cut]`` (cached per cut in this process).

        Args:
            history: The conversation without the system prompt.
            start: Where the current view starts (its earlier part is summarized already).
            cut: Where the new view starts.
            previous: The summary in effect for ``history[:start]``, if any.
        """
        key = (history[start].id if start < len(history) else None, history[cut].id)
        if key not in self._summaries:
            try:
                made = await self.strategy.summarize(list(history[start:cut]), previous)
            except Exception as exc:
                # The summarizer is an aid: its outage must not stop the agent (every later
                # request would fail the same way). The part is left out unsummarized and the
                # summary so far carries on; not cached, so a retried request asks again.
                logger.warning(
                    "context compaction: the summary failed (%s: %s); left out without one",
                    type(exc).__name__,
                    exc,
                )
                logger.debug("summary failure", exc_info=True)
                return previous
            self._summaries[key] = made
        return self._summaries[key]


class _CompactingRun(Capability[DepsT]):
    """One run's compaction: the view of each request, recorded on its answer."""

    __slots__ = ("compactor", "pending")

    def __init__(self, compactor: Compactor[DepsT]) -> None:
        self.compactor = compactor
        self.pending: _View | None = None  # the current request's decision

    async def before_model(self, ctx: RunContext[DepsT], request: ModelRequest) -> ModelRequest:
        """The request with its messages compacted to the budget."""
        messages, self.pending = await request_view(self.compactor, ctx.model, request.messages)
        if messages is request.messages:
            return request
        return dataclasses.replace(request, messages=messages)

    async def after_model(self, ctx: RunContext[DepsT], response: ChatResponse) -> ChatResponse:
        """The answer, carrying the request's decision for its stored message."""
        view, self.pending = self.pending, None
        if view is None:
            return response
        metadata = dict(response.metadata or {})
        stored = dict(metadata.get(MESSAGE_METADATA) or {})
        stored[RECORD_KEY] = record(view, response)
        metadata[MESSAGE_METADATA] = stored
        return dataclasses.replace(response, metadata=metadata)


def _latest_records(
    history: Sequence[Msg],
) -> tuple[int | None, dict[str, object] | None, str | None]:
    """(index of the latest recorded answer, its record, the summary in effect)."""
    found: tuple[int | None, dict[str, object] | None] = (None, None)
    for i in range(len(history) - 1, -1, -1):
        meta = history[i].metadata
        rec = meta.get(RECORD_KEY) if meta else None
        if not isinstance(rec, dict):
            continue
        if found[0] is None:
            found = (i, rec)
        if "summary" in rec:  # the summary that was made with this view's start
            return found[0], found[1], rec["summary"]
    return found[0], found[1], None


def _cut_points(history: Sequence[Msg], first: int) -> list[int]:
    """Indexes ``>= first`` where the view may start: no tool call/result pair is split."""
    points = []
    open_calls: set[str] = set()
    for i, msg in enumerate(history):
        blocks = msg.content if isinstance(msg.content, list) else []
        results = {b["id"] for b in blocks if b["type"] == "tool_result"}
        if i >= first and not open_calls and not results:
            points.append(i)
        open_calls -= results
        open_calls |= {b["id"] for b in blocks if b["type"] == "tool_use"}
    return points


def _build(system: Msg, summary: str | None, kept: list[Msg], cut: bool) -> list[Msg]:
    """The request view: system prompt (with the summary) first, then the kept messages."""
    if summary is not None:
        base = system.content if isinstance(system.content, str) else ""
        system = Msg(system.name, f"{base}\n\n{SUMMARY_HEADER}\n{summary}".lstrip(), "system")
    view = [system]
    if cut and kept and kept[0].role != "user":
        # Providers want the conversation to open with a user turn.
        view.append(Msg("user", OMITTED_NOTE, "user"))
    return view + kept


def _ratio(rec: dict[str, object] | None) -> float:
    """Provider tokens per estimated token, from the latest record (clamped; 1 if none)."""
    tokens, estimate = (rec.get("input_tokens"), rec.get("estimate")) if rec else (None, None)
    if not isinstance(tokens, int | float) or not isinstance(estimate, int | float):
        return 1.0
    if not tokens or not estimate:
        return 1.0
    return min(4.0, max(0.5, float(tokens) / float(estimate)))


def _current_tokens(
    c: Compactor[DepsT],
    history: list[Msg],
    start: int,
    system: Msg,
    rec_at: int | None,
    rec: Any,
) -> float:
    """Tokens of the uncompacted view.

    The provider's count for the part it saw last time, plus estimates for what came after.
    """
    ratio = _ratio(rec) * _MARGIN
    if rec_at is not None and rec.get("input_tokens"):
        # The answer comes back as input, formatted: count it at least like any message.
        answer = max(float(rec.get("output_tokens", 0)), ratio * c.estimate(history[rec_at]))
        known = float(rec["input_tokens"]) + answer
        return known + ratio * sum(c.estimate(m) for m in history[rec_at + 1 :])
    return ratio * (estimate_tokens(system) + sum(c.estimate(m) for m in history[start:]))


def _choose_cut(
    c: Compactor[DepsT], history: list[Msg], start: int, fixed: float, ratio: float, budget: int
) -> int | None:
    """The earliest cut point whose view fits the target (else the budget, else the last)."""
    points = _cut_points(history, start + 1)
    if not points:
        return None
    suffix = [0] * (len(history) + 1)
    for i in range(len(history) - 1, start - 1, -1):
        suffix[i] = suffix[i + 1] + c.estimate(history[i])
    goal = budget * c.target
    fits = [p for p in points if ratio * (fixed + suffix[p]) <= goal]
    if not fits:
        fits = [p for p in points if ratio * (fixed + suffix[p]) <= budget]
    if not fits:
        # Over budget whatever the cut: keep the whole latest turn (a cut inside it would
        # only lose the user's question), and let the provider judge.
        logger.warning("the last turn alone exceeds the context budget (%s tokens)", budget)
        turns = [p for p in points if _opens_turn(history[p])]
        return turns[-1] if turns else None  # None: the view starts with that turn already
    return fits[0]


def _opens_turn(msg: Msg) -> bool:
    """Whether ``msg`` is a user's own message (not tool results)."""
    if msg.role != "user":
        return False
    return isinstance(msg.content, str) or all(b["type"] != "tool_result" for b in msg.content)


async def request_view(
    c: Compactor[DepsT], model: ModelView | None, prompt: list[Msg]
) -> tuple[list[Msg], _View | None]:
    """The messages to send for ``prompt`` (system message first, then memory).

    Returns the view and the decision to record on the answer (None for an empty prompt,
    which is returned as it is). A strategy's summary is counted in the run's usage.

    Raises:
        ContextWindowError: when the system prompt alone exceeds the budget.
    """
    if not prompt:
        return prompt, None
    system, history = prompt[0], prompt[1:]
    rec_at, rec, summary = _latest_records(history)
    recorded_start = rec.get("start") if rec else None
    start_id = recorded_start if isinstance(recorded_start, str) else None
    ids = [m.id for m in history]
    start = ids.index(start_id) if start_id in ids else 0
    if start == 0:
        start_id, summary = None, None
    budget = c.budget(model)
    view = _build(system, summary, history[start:], start > 0)
    tokens = _current_tokens(c, history, start, view[0], rec_at, rec)
    if tokens <= budget:
        return view, _View(start_id, summary, False, _estimate(c, view))
    ratio = _ratio(rec) * _MARGIN
    _check_system_fits(system, _ratio(rec), budget)
    fixed = estimate_tokens(system) + c.strategy.summary_tokens + 2 * _PER_MESSAGE + 30
    cut = _choose_cut(c, history, start, fixed, ratio, budget)
    if cut is None:
        return view, _View(start_id, summary, False, _estimate(c, view))
    summary = await c.summary(history, start, cut, summary)
    seams.compacted(cut, len(history) - cut, summary is not None)
    view = _build(system, summary, history[cut:], True)
    return view, _View(history[cut].id, summary, True, _estimate(c, view))


def _check_system_fits(system: Msg, ratio: float, budget: int) -> None:
    """Refuse, before anything is sent, a system prompt that alone exceeds the budget.

    No cut can help then: every request would be over budget (or rejected by the provider).
    """
    tokens = math.ceil(ratio * estimate_tokens(system))
    if tokens > budget:
        raise ContextWindowError(
            f"the system prompt alone (about {tokens} tokens) exceeds the context budget of "
            f"{budget} tokens (context_window - reserve_output): shorten it, or give the "
            "Compactor a larger context_window or a smaller reserve_output"
        )


def _estimate(c: Compactor[DepsT], view: list[Msg]) -> int:
    return estimate_tokens(view[0]) + sum(c.estimate(m) for m in view[1:])


def record(view: _View, response: ChatResponse) -> dict[str, object]:
    """The record of a request's decision (and token counts), for its answer's metadata."""
    rec: dict[str, object] = {"start": view.start, "estimate": view.estimate}
    usage = response.usage
    if usage is not None and usage.input_tokens:
        rec["input_tokens"] = usage.input_tokens
        rec["output_tokens"] = usage.output_tokens
    if view.new_summary:
        rec["summary"] = view.summary
    return rec
