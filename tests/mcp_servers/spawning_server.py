"""The test MCP server (``py_server.py``), started after spawning a detached descendant.

Usage: python spawning_server.py MODE PIDFILE

* ``setsid``: a child in a session (and process group) of its own, like a job under
  ``set -m`` or ``setsid cmd &``; it keeps the server as its parent.
* ``daemon``: a double-forked daemon: its parent exits at once, so it is re-parented to
  init and nothing links it to the server any more.

The descendant writes its pid to PIDFILE and sleeps; the server then replaces this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SERVER = Path(__file__).with_name("py_server.py")


def daemon(pidfile: str) -> None:
    first = os.fork()
    if first:
        os.waitpid(first, 0)  # the intermediate exits at once: the daemon is orphaned
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # a real daemon lets go of the server's pipes
        os.dup2(devnull, fd)
    Path(pidfile).write_text(str(os.getpid()))
    time.sleep(300)
    os._exit(0)


def main() -> None:
    mode, pidfile = sys.argv[1], sys.argv[2]
    if mode == "daemon":
        daemon(pidfile)
    else:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        Path(pidfile).write_text(str(child.pid))
    os.execv(sys.executable, [sys.executable, str(SERVER), "stdio"])


if __name__ == "__main__":
    main()
