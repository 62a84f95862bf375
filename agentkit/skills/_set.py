"""``SkillSet``: Agent Skills as a capability (catalog in the instructions, tools to load).

Progressive disclosure, as the Agent Skills format intends: every request carries only the
catalog (each skill's name and description, computed once so the prompt cache holds); the
body of a skill and its files reach the model only when it asks, through two tools the
capability offers (``Capability.tools``): ``load_skill`` and ``read_skill_file``.

Nothing of a skill is ever executed here: a skill whose instructions say to run one of its
scripts needs a tool that runs commands (a shell toolkit), and that call goes through the
toolkit, its checks and its approval like any other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from agentkit.agent._capabilities import Capability
from agentkit.skills._skill import Skill, SkillError, load_folder
from agentkit.tools._context import RunContext
from agentkit.tools._response import ToolResponse

if TYPE_CHECKING:
    from agentkit.tools._base import Tool

__all__ = ["LOAD_SKILL", "READ_SKILL_FILE", "SkillSet"]

LOAD_SKILL = "load_skill"
READ_SKILL_FILE = "read_skill_file"

_PREAMBLE = (
    "You have skills: instructions for particular tasks. When a task matches a skill's "
    f"description, call {LOAD_SKILL} with its name before you start, then follow it; "
    f"{READ_SKILL_FILE} reads a file the skill refers to (paths relative to the skill)."
)


class SkillSet(Capability[Any]):
    """Skills in the Agent Skills format (``SKILL.md``), offered to the model on demand.

    Build one with :meth:`from_dir` (folders on disk) or :meth:`from_mcp` (an MCP server's
    resources), or from :class:`Skill` values, and give it to an agent::

        agent = ReActAgent("a", "sys", model, toolkit,
                           capabilities=[SkillSet.from_dir("skills/")])

    The instructions of each request list every skill's name and description; the tools
    ``load_skill(name)`` (the body of ``SKILL.md`` and the list of the skill's files) and
    ``read_skill_file(name, path)`` (one file, UTF-8 text, confined to the skill) bring in
    the rest when the model asks. Nothing is executed.

    Args:
        skills: The skills, in the order the catalog lists them.

    Raises:
        SkillError: when two skills share a name (naming both files).
    """

    def __init__(self, skills: Iterable[Skill]) -> None:
        by_name: dict[str, Skill] = {}
        for skill in skills:
            first = by_name.get(skill.name)
            if first is not None:
                raise SkillError(
                    skill.location,
                    f"a second skill named {skill.name!r} (the first is {first.location}): "
                    f"skill names must be unique",
                )
            by_name[skill.name] = skill
        self._skills = by_name
        self._catalog = _catalog(by_name.values()) if by_name else None
        self._tools: tuple[Tool, ...] | None = None

    @classmethod
    def from_dir(
        cls, path: str | os.PathLike[str], *more_paths: str | os.PathLike[str]
    ) -> SkillSet:
        """Load the skills in ``path`` and ``more_paths``, merged in that order.

        Each path is a folder of skill folders (each holding ``SKILL.md``; folders without
        one are skipped, in name order) or one skill folder itself.

        Raises:
            SkillError: naming the file at fault: a missing folder or one without skills,
                missing or malformed front matter, a missing ``name`` or ``description``,
                a duplicate name, a ``SKILL.md`` over 1 MB or not UTF-8, a symlink that
                points outside its skill's folder.
        """
        skills: list[Skill] = []
        for folder in (Path(path), *(Path(p) for p in more_paths)):
            skills.extend(_skills_in(folder))
        return cls(skills)

    @classmethod
    async def from_mcp(cls, client: Any, *, prefix: str = "skills/") -> SkillSet:
        """Load the skills an MCP server lists as resources (see ``agentkit.skills``).

        A skill is a ``SKILL.md`` resource at ``skill://<folder>/SKILL.md``, or at any URI
        whose part after ``scheme://`` starts with ``prefix`` (``file:///skills/pdf/SKILL.md``
        with the default ``prefix="skills/"`` after the leading ``/``); the other resources
        under the same folder are its files, read from the server when the model asks.

        Raises:
            SkillError: as :meth:`from_dir`, naming the resource URI.
        """
        from agentkit.skills._mcp import mcp_skills

        return cls(await mcp_skills(client, prefix))

    @property
    def skills(self) -> dict[str, Skill]:
        """The skills by name, in catalog order (a copy)."""
        return dict(self._skills)

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        """The catalog: each skill's name and description (the same text every request)."""
        return self._catalog

    async def tools(self, ctx: RunContext[Any]) -> Sequence[Tool]:
        """``load_skill`` and ``read_skill_file`` (none without skills); built once."""
        if not self._skills:
            return ()
        if self._tools is None:
            self._tools = self._build_tools()
        return self._tools

    def _build_tools(self) -> tuple[Tool, ...]:
        from agentkit.tools._function import FunctionTool

        names = list(self._skills)

        async def load_skill(name: str) -> ToolResponse:
            """Load a skill: its full instructions, and the list of its files.

            Args:
                name: The skill's name, as the list of skills gives it.
            """
            skill = self._skills.get(name)
            if skill is None:
                return _unknown(name, names)
            files = skill.file_names()
            text = f'<skill name="{escape(skill.name)}">\n{skill.body}\n</skill>'
            if files:
                text += f"\nFiles of this skill ({READ_SKILL_FILE}): " + ", ".join(files)
            return ToolResponse.text(text)

        async def read_skill_file(name: str, path: str) -> ToolResponse:
            """Read a text file of a skill (a reference, a template, a script's source).

            Args:
                name: The skill's name.
                path: The file's path relative to the skill's folder (``references/x.md``).
            """
            skill = self._skills.get(name)
            if skill is None:
                return _unknown(name, names)
            if skill.files is None:
                return ToolResponse.error(f"The skill {name!r} has no files.")
            try:
                return ToolResponse.text(await skill.files.read(path))
            except SkillError as exc:
                return ToolResponse.error(f"Cannot read {path!r} of the skill {name!r}: {exc}")

        tools: list[Tool] = []
        for fn in (load_skill, read_skill_file):
            tool = FunctionTool(fn)
            # The names as an enum: the model sees them in the schema, a wrong one is
            # refused by the argument check with the list.
            properties = cast("dict[str, dict[str, object]]", tool.parameters["properties"])
            properties["name"]["enum"] = names
            tool.invalidate_schema()
            tools.append(tool)
        return tuple(tools)

    def __repr__(self) -> str:
        return f"SkillSet({list(self._skills)!r})"


def _unknown(name: str, names: list[str]) -> ToolResponse:
    return ToolResponse.error(f"There is no skill named {name!r}. Skills: {', '.join(names)}.")


def _catalog(skills: Iterable[Skill]) -> str:
    entries = [
        f"<skill><name>{escape(s.name)}</name><description>{escape(s.description)}"
        f"</description></skill>"
        for s in skills
    ]
    return "\n".join([_PREAMBLE, "<available_skills>", *entries, "</available_skills>"])


def _skills_in(folder: Path) -> list[Skill]:
    if not folder.is_dir():
        raise SkillError(folder, "not a folder of skills (it does not exist or is a file)")
    if (folder / "SKILL.md").exists() or (folder / "SKILL.md").is_symlink():
        return [load_folder(folder)]
    found = [
        load_folder(child)
        for child in sorted(folder.iterdir(), key=lambda p: p.name)
        if child.is_dir() and ((child / "SKILL.md").exists() or (child / "SKILL.md").is_symlink())
    ]
    if not found:
        raise SkillError(folder, "no skills here: no folder holding a SKILL.md")
    return found
