"""Versioned saved layouts: the one place where a saved state is brought to the current form.

Every layout agentkit saves carries its version under a key of its own (an agent state's
``schema_version``, a served thread's ``serve_thread``...). On load, :func:`upgrade` runs
the layout's migrations one version at a time, so a state saved by any earlier release
reaches today's form through the same chain, and refuses a state from a *newer* release
with an error that says so (an older agentkit must not guess at a layout it cannot know).

A layout change ships three things together: the version bump, the migration from the
previous version, and a corpus of states saved by the release before it
(``tests/state_corpus/<release>/``, loaded by ``tests/test_saved_state_compat.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentkit.exceptions import StateError

__all__ = ["Migration", "upgrade"]

Migration = Callable[[dict[str, object]], dict[str, object]]
"""Turns a version-``n`` state into a version-``n + 1`` state (returning a new dict)."""


def upgrade(
    state: object,
    *,
    what: str,
    key: str,
    current: int,
    migrations: Mapping[int, Migration],
    missing: int | None = None,
) -> dict[str, object]:
    """Bring ``state`` to version ``current`` of its layout; the input is never modified.

    Args:
        state: The loaded state.
        what: The layout's name, for errors ("agent state", "served thread"...).
        key: Where the layout keeps its version.
        current: The version this agentkit writes.
        migrations: ``{n: fn}``, ``fn`` turning version ``n`` into version ``n + 1``.
        missing: The version of a state without ``key`` (None: such a state is refused).

    Raises:
        StateError: for something that is not a dict, a version from a newer agentkit, or
            a version no migration chain reaches.
    """
    if not isinstance(state, dict):
        raise StateError(f"{what} must be a dict, got {type(state).__name__}")
    version = state.get(key, missing)
    if isinstance(version, int) and not isinstance(version, bool) and version > current:
        raise StateError(
            f"unsupported {what} {key} {version}: it was saved by a newer agentkit (this one "
            f"reads {key} up to {current}); upgrade agentkit to load it"
        )
    while isinstance(version, int) and version < current and version in migrations:
        state = migrations[version](state)
        version = state.get(key)
    if version != current:
        raise StateError(
            f"unsupported {what} {key} {version!r}: this agentkit reads {key} {current}"
            + (f" (and migrates from {min(migrations)})" if migrations else "")
        )
    return state
