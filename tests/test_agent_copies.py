"""Cheap agents: ``ReActAgent.copy()``, per-conversation toolkits, and idle conversations
that hold no empty containers (the memory of 10,000 live conversations)."""

from __future__ import annotations

from agentkit.memory import InMemoryMemory
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel, tool_use
from agentkit.tools import Toolkit
from tests._agent_helpers import Recorder, agent_for


def _approval_turn() -> list[object]:
    return [tool_use("guarded", "g1", label="g1")]


async def test_copy_shares_configuration_and_keeps_its_own_conversation() -> None:
    template = agent_for(ScriptedModel(["one", "two"]), Recorder())
    template.register_hook("pre_reply", "noop", lambda *a, **k: None)
    clone = template.copy()
    assert clone.model is template.model
    assert clone.toolkit is template.toolkit
    assert (clone.name, clone.sys_prompt, clone.max_iters) == (
        template.name,
        template.sys_prompt,
        template.max_iters,
    )
    await clone("hi")
    assert len(await clone.memory.get_memory()) == 2
    assert await template.memory.get_memory() == []
    assert clone.conversation is not template.conversation


async def test_copy_with_a_toolkit_copy_switches_groups_on_its_own() -> None:
    template = agent_for(ScriptedModel(["ok"]), Recorder())
    template.toolkit.create_tool_group("extra", "More tools.")
    clone = template.copy(toolkit=template.toolkit.copy())
    clone.toolkit.update_tool_groups(["extra"], active=True)
    assert clone.toolkit.groups["extra"].active
    assert not template.toolkit.groups["extra"].active
    assert clone.toolkit.get_tool("guarded") is template.toolkit.get_tool("guarded")


async def test_listeners_are_per_agent_and_removable() -> None:
    template = agent_for(ScriptedModel(["a", "b"]), Recorder())
    seen: list[object] = []
    template.add_event_listener(seen.append)
    clone = template.copy()
    await clone("hi")
    assert seen == []
    await template("hi")
    assert seen
    template.remove_event_listener(seen.append)
    count = len(seen)
    template.model = ScriptedModel(["c"])
    await template("again")
    assert len(seen) == count


async def test_pending_calls_survive_and_idle_conversations_drop_empty_lists() -> None:
    agent = agent_for(ScriptedModel([_approval_turn(), "done"]), Recorder())
    await agent("go")
    assert [c["id"] for c in agent.pending_tool_calls] == ["g1"]
    assert agent.conversation.has_pending
    await agent.observe(Msg("user", "meanwhile", "user"))
    assert [m.get_text() for m in agent.conversation.deferred] == ["meanwhile"]
    state = agent.state_dict()
    assert state["pending_tool_calls"][0]["id"] == "g1"
    reply = await agent.resume({"g1": True})
    assert reply.get_text() == "done"
    conv = agent.conversation
    assert not conv.has_pending
    assert conv.pending == [] and conv.deferred == []
    texts = [m.get_text() for m in await agent.memory.get_memory()]
    assert "meanwhile" in texts


async def test_memory_skips_repeated_ids_below_and_above_the_scan_limit() -> None:
    memory = InMemoryMemory()
    msgs = [Msg("u", str(i), "user") for i in range(80)]
    for msg in msgs:
        await memory.add([msg, msg])
    await memory.add(msgs[3])  # held before the id set exists...
    await memory.add(msgs[70])  # ...and after
    assert [m.get_text() for m in await memory.get_memory()] == [str(i) for i in range(80)]
    await memory.delete([0])
    await memory.add(msgs[5])
    await memory.add(msgs[0])  # deleted, so stored again
    assert len(memory) == 80
    await memory.clear()
    await memory.add(msgs[1])
    assert len(memory) == 1


def test_toolkit_copy_is_cheap_to_keep() -> None:
    template = Toolkit()
    template.register_tool_function(lambda a: a, name="ident")
    clone = template.copy()
    assert list(clone.tools) == ["ident"]


async def test_a_hook_registered_on_a_copy_stays_on_the_copy() -> None:
    """The copy starts with the template's hooks; later registrations stay on their side."""
    heard: list[str] = []
    template = agent_for(ScriptedModel(["one", "two", "three"]), Recorder())
    template.register_hook("pre_reply", "template", lambda *a: heard.append("template"))
    clone = template.copy()
    clone.register_hook("pre_reply", "clone", lambda *a: heard.append("clone"))
    template.register_hook("post_reply", "late", lambda *a: heard.append("late"))
    await template("hi")
    assert heard == ["template", "late"]
    heard.clear()
    await clone("hi")
    assert heard == ["template", "clone"]
    clone.clear_hooks()
    heard.clear()
    await template("again")
    assert heard == ["template", "late"]


async def test_loop_hooks_of_a_copy_stay_on_the_copy() -> None:
    """Reasoning and acting hooks: the copy keeps the template's; its own stay its own."""
    heard: list[str] = []
    model = ScriptedModel(
        [[tool_use("add", "c1", a=1, b=1)], "two", [tool_use("add", "c2", a=1, b=1)], "two"]
    )
    template = agent_for(model, Recorder())
    template.register_hook("pre_acting", "t", lambda a, k: heard.append(f"template:{a.name}"))
    clone = template.copy()
    clone.name = "clone"
    clone.register_hook("post_reasoning", "c", lambda a, k, m: heard.append("clone"))
    await clone("hi")
    assert heard == ["clone", "template:clone", "clone"]  # the agent replying is the copy
    heard.clear()
    await template("hi")
    assert heard == ["template:bot"]


def test_copy_slots_copies_set_slots_private_ones_and_a_subclass_dict() -> None:
    from agentkit.agent._copying import copy_slots

    class Base:
        __slots__ = ("__secret", "shared", "unset")

        def __init__(self) -> None:
            self.__secret = "s"
            self.shared = [1]

        def secret(self) -> str:
            return self.__secret

    class Child(Base):  # no __slots__: has a __dict__
        pass

    original = Child()
    setattr(original, "extra", "e")  # noqa: B010  (not declared: the subclass's __dict__)
    clone = copy_slots(original, {"shared": [2]})
    assert (clone.secret(), clone.shared, getattr(clone, "extra")) == ("s", [2], "e")  # noqa: B009
    assert not hasattr(clone, "unset") and original.shared == [1]
    plain = Base()
    plain.unset = "now set"
    assert copy_slots(plain, {}).unset == "now set"
