"""One skill of the Agent Skills format: ``SKILL.md`` parsed, and its files read safely.

A skill is a folder holding ``SKILL.md``: YAML front matter between ``---`` lines (``name``
and ``description`` required, any other key kept in ``metadata``), then a Markdown body.
The files of a skill are read through a :class:`SkillFiles` source: a folder on disk
(:class:`FolderFiles`) or an MCP server's resources (``agentkit.skills._mcp``).

Reading a folder is confined to it: a relative path without ``..``, resolved (symlinks
followed) and checked to be inside the folder, a regular file of at most ``MAX_FILE_BYTES``,
UTF-8 text. A symlink pointing outside is refused when the skill is loaded and again when a
file is read (the folder may change in between).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from agentkit.exceptions import AgentkitError, MissingDependencyError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_SKILL_BYTES",
    "FolderFiles",
    "Skill",
    "SkillError",
    "SkillFiles",
    "decode",
    "load_folder",
    "parse_skill",
    "relative_parts",
]

MAX_SKILL_BYTES = 1_000_000
"""The largest ``SKILL.md`` loaded (1 MB): the spec asks for a few thousand tokens."""
MAX_FILE_BYTES = 1_000_000
"""The largest other file of a skill that ``read_skill_file`` returns."""
MAX_DESCRIPTION = 1024  # the spec's bound
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # the spec: lowercase, digits, single hyphens
_MAX_NAME = 64
_SKIPPED_DIRS = frozenset((".git", "__pycache__"))
_MAX_LISTED = 200  # files named in load_skill's answer


class SkillError(AgentkitError, ValueError):
    """A skill that cannot be loaded or a file of it that cannot be read.

    Attributes:
        path: The file (or resource URI) at fault.
    """

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


class SkillFiles(Protocol):
    """Where a skill's files are read from."""

    def names(self) -> list[str]:
        """The skill's files (POSIX paths relative to the skill), sorted."""
        ...

    async def read(self, path: str) -> str:
        """The text of file ``path`` of the skill.

        Raises:
            SkillError: for a path outside the skill, a missing, binary or too large file.
        """
        ...


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill: its front matter, its body, and where its files are read.

    Attributes:
        name: The skill's name (front matter ``name``).
        description: What the skill does and when to use it (front matter ``description``).
        body: The Markdown after the front matter (what ``load_skill`` returns).
        metadata: Every other front matter key (``license``, ``compatibility``,
            ``allowed-tools``, ``metadata``...), as parsed.
        location: Its ``SKILL.md``: a path, or a resource URI.
        files: The source of its other files.
    """

    name: str
    description: str
    body: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    location: str = ""
    files: SkillFiles | None = field(default=None, repr=False, compare=False)

    def file_names(self) -> list[str]:
        """The skill's files other than ``SKILL.md`` (at most 200 named)."""
        if self.files is None:
            return []
        return [n for n in self.files.names() if n != "SKILL.md"][:_MAX_LISTED]


def parse_skill(text: str, where: str, files: SkillFiles | None = None) -> Skill:
    """Parse the text of a ``SKILL.md`` (``where``: its path or URI, for errors).

    Raises:
        SkillError: for missing or malformed front matter, or a missing or invalid
            ``name``/``description``.
    """
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError(
            "agentkit.skills needs PyYAML to read SKILL.md front matter: "
            "pip install 'agentkit[skills]'"
        ) from exc

    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(where, "no YAML front matter: SKILL.md must start with a '---' line")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise SkillError(where, "the YAML front matter is not closed by a '---' line")
    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise SkillError(where, f"malformed YAML front matter: {_yaml_problem(exc)}") from None
    if not isinstance(front, dict):
        raise SkillError(where, "the front matter must be a YAML mapping (name: ..., ...)")
    name = front.get("name")
    description = front.get("description")
    if not isinstance(name, str) or not name:
        raise SkillError(where, "the front matter has no 'name' (a string)")
    if len(name) > _MAX_NAME or not _NAME.fullmatch(name):
        raise SkillError(
            where,
            f"invalid name {name!r}: at most {_MAX_NAME} lowercase letters, digits and "
            f"single hyphens, not at either end",
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillError(where, "the front matter has no 'description' (a non-empty string)")
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(where, f"the description is over {MAX_DESCRIPTION} characters")
    metadata = {str(k): v for k, v in front.items() if k not in ("name", "description")}
    body = "".join(lines[end + 1 :]).strip("\n")
    return Skill(name, description.strip(), body, metadata, where, files)


def _yaml_problem(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:  # the line counted in the file (the front matter starts on line 2)
        return f"{problem} (line {mark.line + 2}, column {mark.column + 1})"
    return str(problem)


def decode(data: bytes, where: str | os.PathLike[str]) -> str:
    if b"\x00" in data:
        raise SkillError(where, "a binary file, not text: only UTF-8 text files can be read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(
            where, f"not UTF-8 text (invalid byte at offset {exc.start}): only UTF-8 can be read"
        ) from None


def relative_parts(path: str, shown: str | os.PathLike[str]) -> tuple[str, ...]:
    """The parts of ``path``, a path relative to a skill (``shown`` in errors).

    Raises:
        SkillError: for an empty, absolute or ``..`` path.
    """
    pure = PurePosixPath(path.replace("\\", "/"))
    if not path or "\x00" in path or not pure.parts:
        raise SkillError(shown, "an empty or invalid path")
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", path):
        raise SkillError(path, "an absolute path: give a path relative to the skill's folder")
    if ".." in pure.parts:
        raise SkillError(path, "'..' is not allowed: paths stay inside the skill's folder")
    return pure.parts


class FolderFiles:
    """The files of a skill folder, confined to it."""

    def __init__(self, root: Path) -> None:
        self.root = root  # resolved
        self._names: list[str] | None = None

    def names(self) -> list[str]:
        """The regular files under the folder (symlinks inside it included), sorted."""
        if self._names is None:
            found: list[str] = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
                base = Path(dirpath)
                for name in filenames:
                    if (base / name).is_file():
                        found.append((base / name).relative_to(self.root).as_posix())
            self._names = sorted(found)
        return list(self._names)

    def check_links(self) -> None:
        """Refuse a symlink under the folder that points outside it (or nowhere)."""
        for dirpath, dirnames, filenames in os.walk(self.root):
            base = Path(dirpath)
            for name in [*dirnames, *filenames]:
                entry = base / name
                if entry.is_symlink():
                    self.inside(entry, entry)

    def inside(self, path: Path, shown: Path) -> Path:
        """``path`` resolved, checked to be inside the folder (``shown`` in errors)."""
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):  # missing target, a loop
            raise SkillError(shown, "a broken symlink or a missing file") from None
        if not resolved.is_relative_to(self.root):
            raise SkillError(shown, "a symlink that points outside the skill's folder: refused")
        return resolved

    def path_of(self, path: str) -> Path:
        """The resolved file ``path`` (relative to the skill) names, checked to be inside.

        Raises:
            SkillError: for an empty, absolute or ``..`` path, or one that escapes.
        """
        shown = self.root / path
        parts = relative_parts(path, shown)
        resolved = self.inside(self.root.joinpath(*parts), shown)
        if not resolved.is_file():
            raise SkillError(shown, "not a file")
        return resolved

    async def read(self, path: str) -> str:
        """The UTF-8 text of file ``path`` of the skill (see :meth:`path_of`)."""
        import anyio

        resolved = self.path_of(path)
        shown = self.root / path
        size = resolved.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SkillError(shown, f"the file is over {MAX_FILE_BYTES // 1_000_000} MB")
        data = await anyio.Path(resolved).read_bytes()
        return decode(data, shown)


def load_folder(folder: Path) -> Skill:
    """Load the skill in ``folder`` (which holds ``SKILL.md``).

    Raises:
        SkillError: naming the file at fault (see :func:`parse_skill`), a ``SKILL.md``
            over 1 MB or not UTF-8, a symlink pointing outside the folder.
    """
    try:
        root = folder.resolve(strict=True)
    except OSError:
        raise SkillError(folder, "the skill folder does not exist") from None
    files = FolderFiles(root)
    skill_md = folder / "SKILL.md"
    if skill_md.is_symlink():
        files.inside(skill_md, skill_md)
    size = skill_md.stat().st_size
    if size > MAX_SKILL_BYTES:
        raise SkillError(skill_md, f"SKILL.md is over 1 MB ({size} bytes)")
    text = decode(skill_md.read_bytes(), skill_md)
    files.check_links()
    return parse_skill(text, str(skill_md), files)
