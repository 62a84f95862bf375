"""``python -m toolkits``: list the toolkits that can be served over MCP."""

from __future__ import annotations

import sys

USAGE = """\
Serve a ready-made agentkit toolkit over MCP (stdio by default):

  python -m toolkits.filesystem DIR [--read-only]          (or --root DIR)
  python -m toolkits.shell DIR [--allow EXE ...] [--allow-shell] [--timeout S]
                               [--sandbox bwrap] [--allow-launchers]
  python -m toolkits.python [--timeout S] [--python PATH]
  python -m toolkits.web [--allow-private] [--timeout S]

Every server also takes --transport streamable_http --host 127.0.0.1 --port 8000 --path /mcp.
"""

if __name__ == "__main__":
    sys.stdout.write(USAGE)
