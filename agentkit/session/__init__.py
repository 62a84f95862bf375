"""State persistence: save an agent under a session id, load it back (another process too).

``SQLiteSession`` is the embedded default; ``JSONSession`` writes one readable file per
session; ``RedisSession`` needs the optional ``redis`` package and ``PostgresSession`` the
optional ``psycopg`` package (both imported on first use). Every store versions its sessions
and refuses a stale save with ``SessionConflictError`` (see ``agentkit.session._base``).
``interrupt_session`` stops a session's run on whichever worker holds it
(``hold_session``; see ``agentkit.session._control``), and ``steer_session`` queues a user
message into it.
"""

from agentkit.exceptions import SessionConflictError
from agentkit.session._base import EncodedState, Session, Stateful, StateGroup
from agentkit.session._control import hold_session, interrupt_session, steer_session
from agentkit.session._json_session import JSONSession
from agentkit.session._postgres_session import PostgresSession
from agentkit.session._redis_session import RedisSession
from agentkit.session._sqlite_session import SQLiteSession

__all__ = [
    "EncodedState",
    "JSONSession",
    "PostgresSession",
    "RedisSession",
    "SQLiteSession",
    "Session",
    "SessionConflictError",
    "StateGroup",
    "Stateful",
    "hold_session",
    "interrupt_session",
    "steer_session",
]
