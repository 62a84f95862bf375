"""Run Python snippets in a fresh interpreter subprocess (never ``exec`` in the agent).

Each snippet runs as ``python -I snippet.py`` in a new temporary directory (its working
directory, deleted afterwards), with stdin closed, a timeout that kills the whole process
group, and an output limit. By default the child gets a minimal environment (``PATH``,
``LANG``, ``HOME`` set to the temporary directory), so the agent's secrets such as API keys
are not visible to the code the model writes.

This is isolation from the agent process, not a security sandbox: the snippet can read and
write anything the user can. The tool is registered with ``requires_approval=True`` by
default.

Use it locally::

    from toolkits import python
    toolkit = python.toolkit(timeout=10)

or serve it over MCP: ``python -m toolkits.python``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import anyio
import anyio.to_thread

from agentkit.tools import ToolContext, Toolkit, annotate
from toolkits._common import target_toolkit
from toolkits._process import run_capped

__all__ = ["PythonRunner", "main", "toolkit"]

# How long a call waits for its temporary folder to be deleted (a snippet may have left
# hundreds of thousands of files) before it returns and leaves the rest to a worker thread.
_CLEANUP_WAIT_S = 5.0


class PythonRunner:
    """Runs snippets in a subprocess.

    Args:
        python: Interpreter to run (default: the one running the agent).
        default_timeout: Seconds a snippet may run when the caller does not say.
        max_timeout: Upper bound for a caller-supplied timeout.
        max_output_bytes: Output kept per run (head and tail).
        max_code_bytes: Largest snippet accepted.
        env: Environment for the child; None gives a minimal one (no inherited secrets).
    """

    def __init__(
        self,
        *,
        python: str = sys.executable,
        default_timeout: float = 30.0,
        max_timeout: float = 300.0,
        max_output_bytes: int = 30_000,
        max_code_bytes: int = 1024 * 1024,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.python = python
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.max_output_bytes = max_output_bytes
        self.max_code_bytes = max_code_bytes
        self.env = dict(env) if env is not None else None

    async def run_python(
        self,
        code: str,
        timeout: float | None = None,  # noqa: ASYNC109  (a tool argument, not a wait)
        ctx: ToolContext | None = None,
    ) -> str:
        """Run a Python 3 program in a fresh interpreter and return what it printed.

        The program runs in an empty temporary directory; use print() to produce output.

        Args:
            code: The complete program source.
            timeout: Seconds before the program is killed.
            ctx: Injected by the Toolkit (hidden from the model): output streams as progress.
        """
        source = code.encode("utf-8", errors="surrogateescape")
        if len(source) > self.max_code_bytes:
            raise ValueError(f"the code is {len(source)} bytes; the limit is {self.max_code_bytes}")
        limit = self.default_timeout if timeout is None else timeout
        if limit <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        limit = min(limit, self.max_timeout)
        workdir = tempfile.mkdtemp(prefix="agentkit-python-")
        try:
            script = Path(workdir, "snippet.py")
            script.write_bytes(source)  # noqa: ASYNC240  (a small local file, just created)
            result = await run_capped(
                [self.python, "-I", str(script)],
                cwd=workdir,
                env=self._child_env(workdir),
                timeout_s=limit,
                max_output_bytes=self.max_output_bytes,
                on_output=ctx.emit_progress if ctx is not None else None,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await _remove_tree(workdir)
        return result.describe(limit)

    def _child_env(self, workdir: str) -> dict[str, str]:
        if self.env is not None:
            return self.env
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "LANG": "C.UTF-8",
            "HOME": workdir,
            "PYTHONIOENCODING": "utf-8",
            "PYTHONUNBUFFERED": "1",
        }


async def _remove_tree(path: str) -> None:
    """Delete the snippet's folder in a worker thread, waiting a bounded time for it.

    Deleting is I/O bound and may take seconds; on the event loop it would freeze every
    other task. Past the wait, the thread finishes the job on its own.
    """

    def remove() -> None:
        shutil.rmtree(path, ignore_errors=True)

    with anyio.move_on_after(_CLEANUP_WAIT_S):
        await anyio.to_thread.run_sync(remove, abandon_on_cancel=True)


def toolkit(
    *,
    requires_approval: bool = True,
    group: str = "basic",
    into: Toolkit | None = None,
    python: str = sys.executable,
    default_timeout: float = 30.0,
    max_timeout: float = 300.0,
    max_output_bytes: int = 30_000,
    env: Mapping[str, str] | None = None,
) -> Toolkit:
    """Build a Toolkit with a ``run_python`` tool.

    Args:
        requires_approval: A human must approve each run (the default).
        group: Tool group to register the tool in.
        into: Register into this Toolkit instead of a new one.
        python: Interpreter to run.
        default_timeout: Seconds a snippet may run when the model does not say.
        max_timeout: Upper bound for a model-supplied timeout.
        max_output_bytes: Output kept per run.
        env: Environment for the child; None gives a minimal one.

    Returns:
        The Toolkit holding the tool.
    """
    runner = PythonRunner(
        python=python,
        default_timeout=default_timeout,
        max_timeout=max_timeout,
        max_output_bytes=max_output_bytes,
        env=env,
    )
    tk = target_toolkit(into, group, "Run Python programs in a subprocess")
    tool = tk.register_tool_function(
        runner.run_python, group=group, requires_approval=requires_approval
    )
    # Arbitrary code: it can write, delete and reach the network.
    annotate(tool, title="Run Python", read_only=False, destructive=True, open_world=True)
    return tk


def main(argv: list[str] | None = None) -> None:
    """Serve ``run_python`` over MCP: ``python -m toolkits.python``."""
    from toolkits._cli import base_parser, serve_from_args

    parser = base_parser("toolkits.python", "Serve agentkit's run_python tool over MCP.")
    parser.add_argument("--timeout", type=float, default=30.0, help="default timeout (s)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run")
    args = parser.parse_args(argv)
    serve_from_args(
        parser,
        args,
        lambda: toolkit(requires_approval=False, python=args.python, default_timeout=args.timeout),
        name="agentkit-python",
    )


if __name__ == "__main__":
    main()
