"""Agent Skills: a ``SkillSet`` lists its skills in the instructions, the model loads a
skill's body and reads its files through the tools it offers, paths stay inside the skill's
folder, and every malformed skill is refused with an error naming the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentkit import ReActAgent, RunResult, Toolkit
from agentkit.exceptions import UsageError
from agentkit.skills import SkillError, SkillSet
from agentkit.testing import ScriptedModel, tool_use

PDF = """---
name: pdf-forms
description: Fill PDF forms. Use when the user gives a PDF form to fill.
license: Apache-2.0
metadata:
  author: example
---
# Filling forms

Read references/fields.md first, then run scripts/fill.py with the shell tool.
"""

NOTES = """---
name: meeting-notes
description: Write meeting notes <short> & clear.
---
Use headings.
"""


def skill(root: Path, folder: str, text: str, files: dict[str, bytes] | None = None) -> Path:
    where = root / folder
    where.mkdir(parents=True)
    (where / "SKILL.md").write_text(text, encoding="utf-8")
    for name, data in (files or {}).items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_bytes(data)
    return where


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    skill(
        root,
        "pdf-forms",
        PDF,
        {
            "references/fields.md": b"Field names are case-sensitive.",
            "scripts/fill.py": b"print('fill')\n",
            "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
            "latin1.txt": "caf\xe9".encode("latin-1"),
        },
    )
    skill(root, "meeting-notes", NOTES)
    (root / "not-a-skill").mkdir()  # no SKILL.md: skipped
    return root


def results(result: RunResult[Any]) -> dict[str, tuple[str, bool]]:
    """The tool results of a run by call id: (text, is_error)."""
    found = {}
    for msg in result.new_messages:
        if isinstance(msg.content, list):
            for block in msg.content:
                if block["type"] == "tool_result":
                    found[block["id"]] = (str(block["output"]), bool(block.get("is_error")))
    return found


async def run_calls(skills: SkillSet, *calls: Any) -> tuple[ScriptedModel, dict[str, Any]]:
    model = ScriptedModel([list(calls), "Done."])
    agent = ReActAgent("bot", "sys", model, Toolkit(), capabilities=[skills])
    return model, results(await agent.run("help"))


async def test_the_instructions_list_every_skill_and_the_tools_are_offered(
    skills_dir: Path,
) -> None:
    skills = SkillSet.from_dir(skills_dir)
    assert list(skills.skills) == ["meeting-notes", "pdf-forms"]  # folder order
    assert skills.skills["pdf-forms"].metadata == {
        "license": "Apache-2.0",
        "metadata": {"author": "example"},
    }
    model = ScriptedModel(["Hi.", "Again."])
    agent = ReActAgent("bot", "sys", model, capabilities=[skills])  # no toolkit at all
    await agent.run("hello")
    await agent.run("again")
    first, second = (r.messages[0].get_text() for r in model.requests)
    assert first == second  # byte-identical: the prompt cache holds
    assert first.startswith("sys\n\n")
    assert (
        "<skill><name>meeting-notes</name><description>Write meeting notes &lt;short&gt; "
        "&amp; clear.</description></skill>" in first
    )
    assert "<name>pdf-forms</name><description>Fill PDF forms." in first
    assert "Read references/fields.md" not in first  # the body waits for load_skill
    assert model.requests[0].tool_names == ["load_skill", "read_skill_file"]
    schema = model.requests[0].tools[0].parameters
    assert schema["properties"]["name"]["enum"] == ["meeting-notes", "pdf-forms"]


async def test_the_model_loads_a_skill_then_reads_its_files(skills_dir: Path) -> None:
    skills = SkillSet.from_dir(skills_dir)
    _, got = await run_calls(
        skills,
        tool_use("load_skill", "c1", name="pdf-forms"),
        tool_use("read_skill_file", "c2", name="pdf-forms", path="references/fields.md"),
        tool_use("read_skill_file", "c3", name="pdf-forms", path="scripts/fill.py"),
    )
    body, error = got["c1"]
    assert not error and body.startswith('<skill name="pdf-forms">\n# Filling forms')
    assert "license" not in body  # the front matter is not repeated
    assert "Files of this skill (read_skill_file): latin1.txt, logo.png, " in body
    assert "references/fields.md, scripts/fill.py" in body
    assert got["c2"] == ("Field names are case-sensitive.", False)
    assert got["c3"] == ("print('fill')\n", False)  # read, never run


async def test_binary_missing_and_unknown_files_are_tool_errors(skills_dir: Path) -> None:
    _, got = await run_calls(
        SkillSet.from_dir(skills_dir),
        tool_use("read_skill_file", "c1", name="pdf-forms", path="logo.png"),
        tool_use("read_skill_file", "c2", name="pdf-forms", path="latin1.txt"),
        tool_use("read_skill_file", "c3", name="pdf-forms", path="nope.md"),
        tool_use("load_skill", "c4", name="no-such-skill"),
        tool_use("read_skill_file", "c5", name="pdf-forms", path="references"),
    )
    assert all(error for _, error in got.values())
    assert "logo.png" in got["c1"][0] and "binary" in got["c1"][0]
    assert "latin1.txt" in got["c2"][0] and "not UTF-8" in got["c2"][0]
    assert "nope.md" in got["c3"][0]
    assert "no-such-skill" in got["c4"][0] and "pdf-forms" in got["c4"][0]
    assert "not a file" in got["c5"][0]


async def test_paths_that_escape_the_skill_folder_are_refused(
    skills_dir: Path, tmp_path: Path
) -> None:
    skills = SkillSet.from_dir(skills_dir)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    # A link planted after loading (the folder changed): refused when read.
    os.symlink("/etc/passwd", skills_dir / "pdf-forms" / "passwd")
    os.symlink(secret, skills_dir / "pdf-forms" / "references" / "more")
    _, got = await run_calls(
        skills,
        tool_use("read_skill_file", "c1", name="pdf-forms", path="../meeting-notes/SKILL.md"),
        tool_use("read_skill_file", "c2", name="pdf-forms", path="../../secret.txt"),
        tool_use("read_skill_file", "c3", name="pdf-forms", path=str(secret)),
        tool_use("read_skill_file", "c4", name="pdf-forms", path="/etc/passwd"),
        tool_use("read_skill_file", "c5", name="pdf-forms", path="passwd"),
        tool_use("read_skill_file", "c6", name="pdf-forms", path="references/more"),
        tool_use("read_skill_file", "c7", name="pdf-forms", path="references/../../x"),
    )
    assert len(got) == 7 and all(error for _, error in got.values())
    texts = " ".join(text for text, _ in got.values())
    assert "TOP SECRET" not in texts and "root:" not in texts
    assert "'..' is not allowed" in got["c1"][0] and "'..' is not allowed" in got["c7"][0]
    assert "absolute path" in got["c3"][0] and "absolute path" in got["c4"][0]
    assert "outside the skill's folder" in got["c5"][0]
    assert "outside the skill's folder" in got["c6"][0]


def test_a_symlink_out_of_a_skill_is_refused_when_loading(tmp_path: Path) -> None:
    where = skill(tmp_path / "skills", "pdf-forms", PDF)
    os.symlink("/etc/passwd", where / "passwd")
    with pytest.raises(SkillError, match="outside the skill's folder") as caught:
        SkillSet.from_dir(tmp_path / "skills")
    assert caught.value.path == str(where / "passwd")


def test_a_skill_md_linked_from_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.md"
    outside.write_text(PDF)
    where = tmp_path / "skills" / "pdf-forms"
    where.mkdir(parents=True)
    os.symlink(outside, where / "SKILL.md")
    with pytest.raises(SkillError, match="outside") as caught:
        SkillSet.from_dir(tmp_path / "skills")
    assert caught.value.path == str(where / "SKILL.md")


BAD = [
    ("no front matter", "# Just Markdown\n", "no YAML front matter"),
    ("unclosed", "---\nname: x\ndescription: y\n", "not closed"),
    ("malformed", "---\nname: [unclosed\ndescription: y\n---\n", "malformed YAML"),
    ("not a mapping", "---\n- a\n- b\n---\n", "must be a YAML mapping"),
    ("no name", "---\ndescription: does things\n---\nbody", "no 'name'"),
    ("no description", "---\nname: thing\n---\nbody", "no 'description'"),
    ("empty description", "---\nname: thing\ndescription: ''\n---\n", "no 'description'"),
    ("bad name", "---\nname: Bad Name\ndescription: d\n---\n", "invalid name 'Bad Name'"),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_malformed_skill_md_is_refused_naming_the_file(
    tmp_path: Path, case: str, text: str, message: str
) -> None:
    where = skill(tmp_path, "thing", text)
    with pytest.raises(SkillError, match=message) as caught:
        SkillSet.from_dir(tmp_path)
    assert caught.value.path == str(where / "SKILL.md")
    assert str(where / "SKILL.md") in str(caught.value)


def test_a_malformed_front_matter_error_gives_the_line(tmp_path: Path) -> None:
    skill(tmp_path, "thing", "---\nname: thing\ndescription: a: b: c\n---\n")
    with pytest.raises(SkillError, match=r"line 3"):
        SkillSet.from_dir(tmp_path)


def test_a_skill_md_over_1_mb_is_refused(tmp_path: Path) -> None:
    where = skill(tmp_path, "big", "---\nname: big\ndescription: d\n---\n" + "x" * 1_000_001)
    with pytest.raises(SkillError, match="over 1 MB") as caught:
        SkillSet.from_dir(tmp_path)
    assert caught.value.path == str(where / "SKILL.md")


def test_a_skill_md_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "latin"
    where.mkdir()
    (where / "SKILL.md").write_bytes(
        "---\nname: latin\ndescription: caf\xe9\n---\n".encode("cp1252")
    )
    with pytest.raises(SkillError, match="not UTF-8") as caught:
        SkillSet.from_dir(tmp_path)
    assert caught.value.path == str(where / "SKILL.md")


def test_folders_are_merged_in_order(skills_dir: Path, tmp_path: Path) -> None:
    more = tmp_path / "more"
    skill(more, "zeta", "---\nname: zeta\ndescription: last letter\n---\nZ.")
    alone = skill(tmp_path / "single", "alpha", "---\nname: alpha\ndescription: first\n---\nA.")
    skills = SkillSet.from_dir(skills_dir, more, alone)  # a skill folder itself is a path too
    assert list(skills.skills) == ["meeting-notes", "pdf-forms", "zeta", "alpha"]


def test_a_duplicate_name_across_folders_is_refused(skills_dir: Path, tmp_path: Path) -> None:
    again = skill(tmp_path / "more", "notes-copy", NOTES)
    with pytest.raises(SkillError, match="second skill named 'meeting-notes'") as caught:
        SkillSet.from_dir(skills_dir, tmp_path / "more")
    assert caught.value.path == str(again / "SKILL.md")
    assert str(skills_dir / "meeting-notes" / "SKILL.md") in str(caught.value)


def test_a_missing_or_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="not a folder of skills"):
        SkillSet.from_dir(tmp_path / "missing")
    with pytest.raises(SkillError, match="no skills here"):
        SkillSet.from_dir(tmp_path)


async def test_a_run_without_the_capability_sees_no_skill_tools(skills_dir: Path) -> None:
    model = ScriptedModel([[tool_use("load_skill", "c1", name="pdf-forms")], "Done."])
    agent = ReActAgent("bot", "sys", model, Toolkit())
    got = results(await agent.run("help"))
    assert model.requests[0].tool_names == []
    assert "available_skills" not in model.requests[0].messages[0].get_text()
    text, error = got["c1"]
    assert error and "load_skill" in text


async def test_a_capability_tool_may_not_shadow_a_toolkit_tool(skills_dir: Path) -> None:
    toolkit = Toolkit()

    @toolkit.tool
    def load_skill(name: str) -> str:
        """Something else."""
        return name

    agent = ReActAgent(
        "bot", "sys", ScriptedModel(["x"]), toolkit, capabilities=[SkillSet.from_dir(skills_dir)]
    )
    with pytest.raises(UsageError, match="'load_skill'"):
        await agent.run("hi")


SKILLS_SERVER = """
import anyio
from agentkit.mcp import MCPApp, serve

app = MCPApp(name="skills")
BODY = "---\\nname: pdf-forms\\ndescription: Fill PDF forms.\\n---\\nRead references/fields.md.\\n"


@app.resource("skill://pdf-forms/SKILL.md")
def skill_md() -> str:
    return BODY


@app.resource("skill://pdf-forms/references/fields.md")
def fields() -> str:
    return "Field names are case-sensitive."


@app.resource("file:///skills/meeting-notes/SKILL.md")
def notes() -> str:
    return "---\\nname: meeting-notes\\ndescription: Write notes.\\n---\\nUse headings."


@app.resource("file:///elsewhere/secret.txt")
def secret() -> str:
    return "TOP SECRET"


anyio.run(serve, app)
"""


async def test_skills_from_an_mcp_server_load_and_read_through_it(tmp_path: Path) -> None:
    import sys

    from agentkit.mcp import MCPClient, StdioServer

    script = tmp_path / "skills_server.py"
    script.write_text(SKILLS_SERVER)
    async with MCPClient("skills", StdioServer(sys.executable, [str(script)])) as client:
        skills = await SkillSet.from_mcp(client)
        assert list(skills.skills) == ["meeting-notes", "pdf-forms"]
        assert skills.skills["pdf-forms"].location == "skill://pdf-forms/SKILL.md"
        _, got = await run_calls(
            skills,
            tool_use("load_skill", "c1", name="pdf-forms"),
            tool_use("read_skill_file", "c2", name="pdf-forms", path="references/fields.md"),
            tool_use("read_skill_file", "c3", name="pdf-forms", path="../../elsewhere/secret.txt"),
            tool_use("read_skill_file", "c4", name="meeting-notes", path="secret.txt"),
        )
    body, error = got["c1"]
    assert not error and "Read references/fields.md." in body
    assert "Files of this skill (read_skill_file): references/fields.md" in body
    assert got["c2"] == ("Field names are case-sensitive.", False)
    assert got["c3"][1] and "'..' is not allowed" in got["c3"][0]
    assert got["c4"][1] and "no such file" in got["c4"][0]
