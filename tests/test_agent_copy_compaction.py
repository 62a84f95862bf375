"""``ReActAgent.copy()`` keeps the template's context compaction.

A chat server serves one template agent to many conversations with ``template.copy()``; a
``Compactor`` among the template's capabilities must keep every conversation's requests under the
budget too, each with a view of its own.
"""

from __future__ import annotations

from agentkit import ReActAgent
from agentkit.agent._compaction import Compactor
from agentkit.memory import InMemoryMemory
from agentkit.messages import Msg
from agentkit.testing import ScriptedModel


async def _long_memory(turns: int) -> InMemoryMemory:
    memory = InMemoryMemory()
    for i in range(turns):
        await memory.add(Msg("user", f"question {i} " + "word " * 800, "user"))
        await memory.add(Msg("bot", f"answer {i} " + "word " * 800, "assistant"))
    return memory


async def test_a_copy_compacts_like_its_template() -> None:
    model = ScriptedModel(["done"] * 3)
    compactor = Compactor(context_window=6000, reserve_output=1000)
    template = ReActAgent("bot", "Be brief.", model, capabilities=[compactor])
    conversation = template.copy(memory=await _long_memory(10))
    assert conversation.capabilities == (compactor,)
    await conversation("next")
    sent = model.requests[-1].messages
    assert len(sent) < 21  # older turns left out (or summarized): under the budget
    assert sent[-1].get_text() == "next"
    other = template.copy(memory=await _long_memory(1))
    await other("hi")
    assert len(model.requests[-1].messages) == 4  # system, two kept turns, the new one
