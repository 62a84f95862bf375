"""State persistence: save an agent under a session id, load it back (another process too).

``SQLiteSession`` is the embedded default; ``JSONSession`` writes one readable file per
session; ``RedisSession`` needs the optional ``redis`` package (imported on first use).
"""

from agentkit.session.base import Session, Stateful, StateGroup
from agentkit.session.json_session import JSONSession
from agentkit.session.redis_session import RedisSession
from agentkit.session.sqlite_session import SQLiteSession

__all__ = ["JSONSession", "RedisSession", "SQLiteSession", "Session", "StateGroup", "Stateful"]
