"""Tools: the ``Tool`` interface, ``ToolResponse`` and the ``Toolkit``."""

from agentkit.tools.base import Tool
from agentkit.tools.response import ToolResponse

__all__ = ["Tool", "ToolResponse"]
