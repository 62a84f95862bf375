"""The agents satisfy the pipelines' structural protocols, as ``mypy --strict`` sees them.

``ReActAgent`` is a ``StreamingAgent`` and ``UserAgent`` an ``InterruptibleAgent``: their
``interrupt()`` returns a bool, which the protocols must accept (they once required None,
so neither agent type-checked as one).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

USAGE = """
from agentkit import ReActAgent
from agentkit.agent._user import UserAgent
from agentkit.pipelines._protocols import (
    AgentLike,
    HubParticipant,
    InterruptibleAgent,
    StreamingAgent,
)


def roles(agent: ReActAgent, user: UserAgent) -> None:
    streaming: StreamingAgent = agent
    participant: HubParticipant = agent
    interruptible: InterruptibleAgent = user
    talker: AgentLike = user
    print(streaming, participant, interruptible, talker)
"""


@pytest.mark.timeout(300)
def test_agents_satisfy_the_pipeline_protocols_under_mypy_strict(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "protocol_usage.py"
    module.write_text(USAGE)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"mypy --strict refused:\n{result.stdout}{result.stderr}"
