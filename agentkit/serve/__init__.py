"""Serve agents to people: an AG-UI HTTP server and a web chat (``agentkit serve``).

::

    from agentkit.serve import create_app
    app = create_app(make_agent)          # an ASGI app; run it with uvicorn
    configure_logging("INFO")             # failed runs and saves reach stderr

See docs/serving.md for the protocol mapping, the endpoints and the security model.
"""

try:  # the optional extra: a clear message instead of a bare ModuleNotFoundError
    import ag_ui.core  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"agentkit.serve needs the 'serve' extra ({exc.name} is missing): "
        "pip install 'agentkit[serve]'"
    ) from exc

from agentkit.serve._app import AgentFactory, DepsBuilder, create_app
from agentkit.serve._check import ServedCheck, check_served_threads
from agentkit.serve._events import TOOL_PROGRESS_EVENT
from agentkit.serve._frontend import FrontendTool, current_state
from agentkit.serve._logging import configure_logging
from agentkit.serve._runner import APPROVAL_SCHEMA, current_deps

__all__ = [
    "APPROVAL_SCHEMA",
    "TOOL_PROGRESS_EVENT",
    "AgentFactory",
    "DepsBuilder",
    "FrontendTool",
    "ServedCheck",
    "check_served_threads",
    "configure_logging",
    "create_app",
    "current_deps",
    "current_state",
]
