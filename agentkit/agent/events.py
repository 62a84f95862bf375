"""Deprecated home of the event classes: import them from ``agentkit.events``."""

from __future__ import annotations

import warnings
from typing import Any

import agentkit.events as _events

__all__: list[str] = []

# The event announcing calls that wait for approval was renamed: ``ApprovalRequired`` is
# now the exception a tool raises (``agentkit.ApprovalRequired``).
RENAMED = {"ApprovalRequired": "ApprovalRequested"}


def deprecated_event(module: str, name: str) -> Any:
    """The event class ``name`` imported from ``module`` (warns; AttributeError if none)."""
    new = RENAMED.get(name, name)
    if new not in _events.__all__:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated; use agentkit.events.{new}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(_events, new)


def __getattr__(name: str) -> Any:
    return deprecated_event(__name__, name)
