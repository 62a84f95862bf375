"""Tools: the ``Tool`` interface, ``ToolResponse``, ``ToolContext`` and the ``Toolkit``.

``FunctionTool`` (pydantic, docstring-parser) is imported on first use, so
``import agentkit`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentkit.tools._errors import INTERRUPTED_TEXT, ArgumentsError, interrupted_response
from agentkit.tools.base import Tool
from agentkit.tools.context import ToolContext
from agentkit.tools.response import ToolResponse, ToolResultContent
from agentkit.tools.toolkit import Namesake, ToolGroup, Toolkit

if TYPE_CHECKING:
    from agentkit.tools.function import FunctionTool

__all__ = [
    "INTERRUPTED_TEXT",
    "ArgumentsError",
    "FunctionTool",
    "Namesake",
    "Tool",
    "ToolContext",
    "ToolGroup",
    "ToolResponse",
    "ToolResultContent",
    "Toolkit",
    "interrupted_response",
]


def __getattr__(name: str) -> Any:
    if name == "FunctionTool":
        from agentkit.tools.function import FunctionTool

        return FunctionTool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
