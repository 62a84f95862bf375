"""Old keyword spellings, still accepted with a ``DeprecationWarning``.

agentkit has one spelling per concept (``group``, ``timeout``); the AgentScope-era names
(``group_name``, ``execution_timeout``) keep working for a deprecation period.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

from agentkit.exceptions import UsageError

__all__ = ["renamed"]

T = TypeVar("T")


def renamed(old: str, new: str, old_value: T | None, new_value: T, default: T) -> T:
    """The value of keyword ``new``, taking a deprecated ``old`` spelling into account.

    Args:
        old: The deprecated keyword's name.
        new: The keyword's name now.
        old_value: What was passed as ``old`` (None: not passed).
        new_value: What was passed as ``new`` (its default when not passed).
        default: ``new``'s default, to tell whether both were given.

    Raises:
        UsageError: both spellings were given, with different values.
    """
    if old_value is None:
        return new_value
    warnings.warn(
        f"{old}= is deprecated and will be removed; use {new}=", DeprecationWarning, stacklevel=3
    )
    if new_value != default and new_value != old_value:
        raise UsageError(f"pass {new}= only ({old}= is its deprecated spelling)")
    return old_value
