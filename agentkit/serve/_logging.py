"""One-call logging for a served agent: failed runs and failed saves reach the operator.

``import agentkit`` attaches a ``NullHandler`` (a library does not print into its user's
logs uninvited), so under a plain ``uvicorn module:app`` the server's own error lines
("run ... failed", "could not save thread ...") go nowhere. ``agentkit serve`` calls
:func:`configure_logging`; an application that runs uvicorn itself calls it once too.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

__all__ = ["configure_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _ServeHandler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure_logging` installs (found again to be replaced)."""


def configure_logging(level: int | str = "INFO", *, stream: TextIO | None = None) -> None:
    """Send agentkit's log records (``agentkit.*``: the server, sessions, tools) to a stream.

    One line per record (``time LEVEL logger: message``, the traceback below it for errors):
    a failed run names its thread, run and cause; a failed save names the thread. Calling
    it again replaces the handler it installed (no duplicated lines); other handlers on the
    ``agentkit`` logger (yours) are left alone.

    Args:
        level: The lowest level shown (``"DEBUG"``, ``"INFO"``, ``"WARNING"``, ... or an int).
        stream: Where lines go (default: standard error, where uvicorn logs too).

    Raises:
        ValueError: for a level name logging does not know.
    """
    if isinstance(level, str):
        named = logging.getLevelName(level.upper())
        if not isinstance(named, int):
            raise ValueError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING or ERROR")
        level = named
    root = logging.getLogger("agentkit")
    for handler in [h for h in root.handlers if isinstance(h, _ServeHandler)]:
        root.removeHandler(handler)
    handler = _ServeHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
