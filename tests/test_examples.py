"""Every example runs in the test suite so it cannot rot."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path: pathlib.Path) -> None:
    env_clear = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "", "AGENTKIT_MODEL": ""}
    import os

    env = {**os.environ, **env_clear}
    out = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stdout + out.stderr
