"""Multi-agent building blocks: group chat (``MsgHub``), pipelines, and agents as tools."""

from agentkit.pipelines._agent_tool import AgentTool, agent_as_tool
from agentkit.pipelines._functional import fanout_pipeline, sequential_pipeline
from agentkit.pipelines._hub import MsgHub

__all__ = ["AgentTool", "MsgHub", "agent_as_tool", "fanout_pipeline", "sequential_pipeline"]
