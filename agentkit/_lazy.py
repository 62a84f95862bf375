"""The one lazy-import helper: a package's names that load their module on first use.

A package face lists its public names in ``__all__``; the ones whose modules are costly to
import (provider SDKs, the MCP SDK, pydantic-heavy modules) are given to :func:`lazy_exports`
instead of imported at the top::

    if TYPE_CHECKING:
        from agentkit.models._openai import OpenAIChatModel
    else:
        __getattr__, __dir__ = lazy_exports(__name__, __all__, {"OpenAIChatModel": "._openai"})

Type checkers see the ``TYPE_CHECKING`` imports only, so a misspelt name is an error in the
user's code (a module-level ``__getattr__`` visible to mypy would make every name ``Any``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, public: Sequence[str], names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` (PEP 562) for a package's lazy names.

    Args:
        package: The package's ``__name__``.
        public: Its ``__all__`` (what ``dir()`` lists).
        names: Each lazy name -> the module that defines it, absolute or relative to
            ``package`` (``"._openai"``).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level. A name is imported
        on its first lookup and then stored in the package, so later lookups are plain
        attribute reads.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__
