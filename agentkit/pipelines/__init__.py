"""Multi-agent building blocks: group chat (``MsgHub``), pipelines, and agents as tools."""

from agentkit.pipelines.agent_tool import AgentTool, agent_as_tool
from agentkit.pipelines.functional import fanout_pipeline, sequential_pipeline
from agentkit.pipelines.hub import MsgHub

__all__ = ["AgentTool", "MsgHub", "agent_as_tool", "fanout_pipeline", "sequential_pipeline"]
