"""``python -m agentkit``: the same as the ``agentkit`` command."""

import sys

from agentkit.cli import main

sys.exit(main())
