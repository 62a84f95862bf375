"""Shallow copies of slotted objects (``ReActAgent.copy``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["copy_slots"]

_T = TypeVar("_T")


def _slot_names(cls: type) -> tuple[str, ...]:
    names = set()
    for klass in cls.__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):  # stored under its mangled name
                name = f"_{klass.__name__.lstrip('_')}{name}"
            names.add(name)
    return tuple(sorted(names))


def _slot_copier(names: tuple[str, ...]) -> Callable[[object, object], None]:
    """A function doing ``clone.<name> = agent.<name>`` for every slot, as straight-line code.

    Attribute access written out is specialized by the interpreter for slots (a direct
    read and write at a fixed offset), three times cheaper than a loop of ``getattr`` and
    ``setattr`` over two dozen names: most of an agent copy's time. The names are slot
    names, which Python requires to be identifiers, so the generated source is just these
    assignments (the technique ``dataclasses`` uses for ``__init__``).
    """
    body = "".join(f"    clone.{name} = agent.{name}\n" for name in names) or "    pass\n"
    namespace: dict[str, Callable[[object, object], None]] = {}
    exec(f"def copy_slots(agent, clone):\n{body}", {}, namespace)
    return namespace["copy_slots"]


_COPIERS: dict[type, tuple[tuple[str, ...], Callable[[object, object], None]]] = {}


def copy_slots(agent: _T, fresh: Mapping[str, object]) -> _T:
    """A shallow copy of ``agent`` with the slots in ``fresh`` set anew.

    Several times faster than ``copy.copy`` for slots.
    """
    cls = type(agent)
    plan = _COPIERS.get(cls)
    if plan is None:
        names = _slot_names(cls)
        plan = _COPIERS[cls] = (names, _slot_copier(names))
    names, copy_all = plan
    clone = cls.__new__(cls)
    try:
        copy_all(agent, clone)
    except AttributeError:  # a slot never set: copy the others one by one
        for name in names:
            if hasattr(agent, name):
                setattr(clone, name, getattr(agent, name))
    for name, value in fresh.items():
        setattr(clone, name, value)
    if hasattr(agent, "__dict__"):  # a subclass's own attributes
        clone.__dict__.update(agent.__dict__)
    return clone
