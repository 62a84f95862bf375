"""Skills from an MCP server's resources (``SkillSet.from_mcp``).

A server publishes a skill as resources: its ``SKILL.md`` and its other files under one
folder of a URI (``skill://pdf/SKILL.md``, ``skill://pdf/references/forms.md``; or any
scheme with the folder under ``prefix``: ``file:///skills/pdf/SKILL.md``). Each
``SKILL.md`` is read when the set is built (the catalog needs its front matter); the
other files are read from the server when the model asks, and only files the server
listed can be read: a path is looked up among them, never turned into a URI.
"""

from __future__ import annotations

import re
from typing import Any

from agentkit.skills._skill import (
    MAX_FILE_BYTES,
    MAX_SKILL_BYTES,
    Skill,
    SkillError,
    parse_skill,
    relative_parts,
)

__all__ = ["ResourceFiles", "mcp_skills"]

# ``client.read_resource`` gives text contents as "[resource URI]\n" + the text, and a
# binary one as a "[binary resource URI (...)]" note (agentkit.mcp._convert).
_TEXT_HEAD = re.compile(r"\[resource [^\]\n]*\]\n")
_BINARY_HEAD = "[binary resource "


def _key(uri: str, prefix: str) -> str | None:
    """The path of ``uri`` below the skills root (``pdf/SKILL.md``), or None."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return None
    if scheme == "skill":
        return rest
    rest = rest.lstrip("/")
    return rest[len(prefix) :] if prefix and rest.startswith(prefix) else None


async def _read_text(client: Any, uri: str, limit: int) -> str:
    blocks = await client.read_resource(uri)
    parts: list[str] = []
    for block in blocks:
        text = block.get("text") if block.get("type") == "text" else None
        if not isinstance(text, str) or text.startswith(_BINARY_HEAD):
            raise SkillError(uri, "a binary resource, not text: only UTF-8 text can be read")
        head = _TEXT_HEAD.match(text)
        parts.append(text[head.end() :] if head else text)
    text = "".join(parts)
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise SkillError(uri, f"over {limit // 1_000_000} MB")
    return text


class ResourceFiles:
    """The files of a skill an MCP server lists, read from it on demand."""

    def __init__(self, client: Any, uris: dict[str, str]) -> None:
        self.client = client
        self.uris = uris  # path relative to the skill -> resource URI

    def names(self) -> list[str]:
        """The skill's listed files, sorted."""
        return sorted(self.uris)

    async def read(self, path: str) -> str:
        """The text of the listed file ``path``.

        Raises:
            SkillError: for a path that is not relative, not listed, or a binary file.
        """
        key = "/".join(relative_parts(path, path))
        uri = self.uris.get(key)
        if uri is None:
            raise SkillError(path, "no such file in this skill")
        return await _read_text(self.client, uri, MAX_FILE_BYTES)


async def mcp_skills(client: Any, prefix: str) -> list[Skill]:
    """The skills among the resources ``client``'s server lists, in folder order.

    Raises:
        SkillError: naming the URI of a ``SKILL.md`` that cannot be loaded.
    """
    keys: dict[str, str] = {}
    for resource in await client.list_resources():
        uri = str(resource.uri)
        key = _key(uri, prefix)
        if key:
            keys[key] = uri
    folders = sorted(k[: -len("/SKILL.md")] for k in keys if k.endswith("/SKILL.md"))
    files: dict[str, dict[str, str]] = {folder: {} for folder in folders}
    for key, uri in keys.items():
        owner = max((f for f in folders if key.startswith(f + "/")), key=len, default=None)
        if owner is not None:
            files[owner][key[len(owner) + 1 :]] = uri
    skills = []
    for folder in folders:
        uri = keys[f"{folder}/SKILL.md"]
        text = await _read_text(client, uri, MAX_SKILL_BYTES)
        skills.append(parse_skill(text, uri, ResourceFiles(client, files[folder])))
    return skills
