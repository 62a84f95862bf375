"""What code a durable run was recorded under, and whether this worker may finish it.

DBOS recovers a workflow only on a worker of the same ``application_version`` (by default a
hash of the workflows' source, which for a ``DBOSAgent`` is agentkit's one workflow function:
it does not change when the agent's prompt, tools or model do). So agentkit records its own
version with every run: the agentkit release and a hash of the agent's configuration (its
name, prompt, model, and each tool's name and schema). A worker that executes a run which
has completed steps under another version refuses it (``StateError`` naming both) instead of
finishing it half on new code; a run with no completed step runs whole on this worker's code.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from typing import TYPE_CHECKING

from agentkit._version import __version__
from agentkit.agent._runs import DepsT, OutputT
from agentkit.exceptions import StateError

if TYPE_CHECKING:
    from agentkit.agent import ReActAgent
    from agentkit.durable._records import CodeVersion

__all__ = ["check_code_version", "code_version", "describe", "recorded_steps"]


def code_version(agent: ReActAgent[DepsT, OutputT]) -> CodeVersion:
    """The version a run of ``agent`` records: agentkit's release and the agent's config hash."""
    model = agent.model
    config = {
        "name": agent.name,
        "prompt": agent.sys_prompt,
        "model": [type(model).__name__, model.model_name],
        # The OpenAI form of each tool: the hash recorded by 0.2.0 runs stays the same.
        "tools": sorted(
            [name, tool.tool_definition.to_openai()] for name, tool in agent.toolkit.tools.items()
        ),
    }
    digest = hashlib.sha256(
        json.dumps(config, sort_keys=True, default=repr).encode("utf-8")
    ).hexdigest()
    return {"agentkit": __version__, "agent": digest[:16]}


def describe(version: CodeVersion) -> str:
    """``"agentkit 0.2.0, agent config 1a2b..."``: how errors and the CLI name a version."""
    return f"agentkit {version['agentkit']}, agent config {version['agent']}"


async def recorded_steps(workflow_id: str) -> int:
    """How many steps ``workflow_id`` has recorded, read outside its step log.

    Called from workflow code, ``DBOS.list_workflow_steps`` would itself become a step of
    the workflow (and shift every step id after it); the read runs in an empty context in a
    thread, as an outside process would make it.
    """
    import anyio.to_thread
    from dbos import DBOS

    def count() -> int:
        return len(DBOS.list_workflow_steps(workflow_id))

    return await anyio.to_thread.run_sync(contextvars.Context().run, count)


async def check_code_version(
    workflow_id: str, recorded: CodeVersion | None, current: CodeVersion
) -> None:
    """Refuse to finish a run that has completed steps under another version.

    Raises:
        StateError: ``recorded`` differs from ``current`` and the run has recorded steps.
    """
    if recorded is None or recorded == current:
        return
    steps = await recorded_steps(workflow_id)
    if steps == 0:  # nothing ran yet: the run runs whole on this worker's code
        return
    raise StateError(
        f"durable run {workflow_id!r} was recorded under {describe(recorded)} and this "
        f"worker runs {describe(current)}: refusing to finish its {steps} recorded step(s) "
        "on different code. Run it on a worker with the recorded version (fork it there with "
        "DBOSClient.fork_workflow(..., application_version=...)), or start it again"
    )
