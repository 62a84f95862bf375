"""Prompt-caching pieces every OpenAI-style adapter shares (no SDK import).

The provider-neutral request is ``ModelSettings["cache"]`` (a ``PromptCache``); each format
module turns it into its provider's wire form: ``mark_cache_points`` in
``_anthropic_format``, ``add_cache_points`` in ``_bedrock_format``, and here the two body
fields of OpenAI's Chat Completions and Responses APIs.
"""

from __future__ import annotations

from agentkit.models._base import PromptCache

__all__ = ["openai_cache_fields"]


def openai_cache_fields(cache: PromptCache | None) -> dict[str, object]:
    """The body fields of OpenAI's prompt caching (Chat Completions and Responses alike).

    OpenAI caches every long prompt on its own, with no marks in the prompt; what a request
    can add is the routing key (``prompt_cache_key``) and the extended retention
    (``prompt_cache_retention: "24h"``, for ``ttl="1h"``). Nothing else is sent, so the
    OpenAI-compatible servers that refuse unknown fields see none unless the caller asks.
    """
    if not cache:
        return {}
    fields: dict[str, object] = {}
    if "key" in cache:
        fields["prompt_cache_key"] = cache["key"]
    if cache.get("ttl") == "1h":
        fields["prompt_cache_retention"] = "24h"
    return fields
