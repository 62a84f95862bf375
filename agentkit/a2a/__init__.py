"""Agents across frameworks: the A2A protocol (1.0, on the official ``a2a-sdk``) both ways.

::

    from agentkit.a2a import A2AAgent, to_a2a

    app = to_a2a(make_agent, auth_token="s3cret")     # an ASGI app; run it with uvicorn
    remote = A2AAgent("http://127.0.0.1:8000", auth="s3cret", name="researcher")
    toolkit.register_tool(remote.as_tool())            # a remote agent as a tool

A context id is a conversation (its agent state lives in the ``sessions`` store, with the
tasks), ``CancelTask`` is ``agent.interrupt()``, ``TASK_STATE_INPUT_REQUIRED`` is a call
waiting for approval. See docs/a2a.md for the mapping, the decision format and the
security model.
"""

try:  # the optional extra: a clear message instead of a bare ModuleNotFoundError
    import a2a.server.routes  # noqa: F401
    import sse_starlette  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from agentkit.exceptions import MissingDependencyError

    raise MissingDependencyError(
        f"agentkit.a2a needs the 'a2a' extra ({exc.name} is missing): pip install 'agentkit[a2a]'"
    ) from exc

from agentkit.a2a._app import to_a2a
from agentkit.a2a._client import A2AAgent, RemoteAgentError, RemoteAuthRequiredError

__all__ = ["A2AAgent", "RemoteAgentError", "RemoteAuthRequiredError", "to_a2a"]
