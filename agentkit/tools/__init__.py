"""Tools: ``Tool``, ``ToolResponse``, ``ToolContext``, the ``Toolkit`` and ``ToolSource``.

``FunctionTool`` (pydantic, docstring-parser) is imported on first use, so
``import agentkit`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.tools._annotations import ToolAnnotations, annotate
from agentkit.tools._base import Tool
from agentkit.tools._context import ToolContext
from agentkit.tools._errors import INTERRUPTED_TEXT, ArgumentsError, interrupted_response
from agentkit.tools._response import ToolResponse, ToolResultContent
from agentkit.tools._sources import ToolSource
from agentkit.tools._toolkit import Namesake, ToolGroup, Toolkit

__all__ = [
    "INTERRUPTED_TEXT",
    "ArgumentsError",
    "FunctionTool",
    "Namesake",
    "Tool",
    "ToolAnnotations",
    "ToolContext",
    "ToolGroup",
    "ToolResponse",
    "ToolResultContent",
    "ToolSource",
    "Toolkit",
    "annotate",
    "interrupted_response",
]

if TYPE_CHECKING:
    from agentkit.tools._function import FunctionTool
else:
    from agentkit._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(__name__, __all__, {"FunctionTool": "._function"})
