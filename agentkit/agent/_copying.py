"""Shallow copies of slotted objects (``ReActAgent.copy``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["copy_slots"]

_T = TypeVar("_T")


def _slot_names(cls: type) -> tuple[str, ...]:
    names = {
        name
        for klass in cls.__mro__
        for name in getattr(klass, "__slots__", ())
        if name not in ("__dict__", "__weakref__")
    }
    return tuple(sorted(names))


_SLOTS: dict[type, tuple[str, ...]] = {}
_UNSET = object()


def copy_slots(agent: _T, fresh: Mapping[str, object]) -> _T:
    """A shallow copy of ``agent`` with the slots in ``fresh`` set anew.

    Several times faster than ``copy.copy`` for slots.
    """
    cls = type(agent)
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = _slot_names(cls)
    clone = cls.__new__(cls)
    for name in names:
        value = fresh[name] if name in fresh else getattr(agent, name, _UNSET)
        if value is not _UNSET:  # else a slot never set
            setattr(clone, name, value)
    if hasattr(agent, "__dict__"):  # a subclass's own attributes
        clone.__dict__.update(agent.__dict__)
    return clone
