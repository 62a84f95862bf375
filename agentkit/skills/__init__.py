"""Agent Skills: ``SKILL.md`` folders as a capability the model loads from on demand.

A skill (the `Agent Skills <https://agentskills.io>`_ format that Claude, Codex, Gemini CLI
and most agent frameworks load) is a folder with a ``SKILL.md``: YAML front matter with
``name`` and ``description``, then Markdown instructions; other files of the folder
(references, templates, scripts) are read when the instructions call for them::

    from agentkit.skills import SkillSet

    skills = SkillSet.from_dir("skills/", "~/.agents/skills")
    agent = ReActAgent("a", "sys", model, toolkit, capabilities=[skills])

The catalog (names and descriptions) goes into every request's instructions; the model
calls ``load_skill`` for a body and ``read_skill_file`` for a file. Skills are never run:
a skill's script runs only through a tool of the toolkit (a shell tool), with its approval.
"""

from __future__ import annotations

from agentkit.skills._set import SkillSet
from agentkit.skills._skill import MAX_FILE_BYTES, MAX_SKILL_BYTES, Skill, SkillError

__all__ = ["MAX_FILE_BYTES", "MAX_SKILL_BYTES", "Skill", "SkillError", "SkillSet"]
