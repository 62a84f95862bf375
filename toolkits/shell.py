"""Run commands in a subprocess, confined to a working directory, with a timeout.

A command is an argument list, or a string split with ``shlex.split``: no shell is involved
(so no pipes, redirections or globbing) unless ``allow_shell=True``. Each command runs in its
own process group; a timeout, an interrupt of the agent, or the command's own exit kills
the whole group, background jobs included. Output (stdout and stderr interleaved) is cut in
the middle past a limit; bytes that are not UTF-8 become replacement characters.

Without ``sandbox="bwrap"`` this is not a sandbox: a command can do anything the user running
the agent can. The tool is registered with ``requires_approval=True`` by default. An
allow-list of executables narrows which program starts; the known ways for common programs
to start others (``git -c``/aliases, ``find -exec``, ``tar --to-command``...) are refused,
and programs whose job is to run others (shells, interpreters, ``env``, ``xargs``) may only
be listed with ``allow_launchers=True``. That is a guard against mistakes, not a boundary:
``sandbox="bwrap"`` runs every command in bubblewrap (system directories read-only, only the
root directory writable, no network, private ``/tmp`` and PIDs).

Use it locally::

    from toolkits import shell
    toolkit = shell.toolkit("/path/to/project", allowed_executables=["ls", "git"])

or serve it over MCP: ``python -m toolkits.shell --root /path/to/project --allow ls``.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentkit.tools import ToolContext, Toolkit, annotate
from toolkits._common import escape_name, resolve_inside, target_toolkit
from toolkits._process import run_capped
from toolkits._shellguard import (
    LAUNCHERS,
    check_arguments,
    git_environment,
    sandbox_argv,
    sandbox_program,
)

__all__ = ["Shell", "main", "toolkit"]


class Shell:
    """Command runner bound to a root directory.

    Args:
        root: Commands run in this directory or below it.
        allowed_executables: If given, only these programs may run (names looked up on
            ``PATH``, or absolute paths); compared after resolving symlinks.
        allow_shell: Run string commands through ``/bin/sh -c`` (pipes, redirections,
            globbing). Cannot be combined with ``allowed_executables``.
        default_timeout: Seconds a command may run when the caller does not say.
        max_timeout: Upper bound for a caller-supplied timeout.
        max_output_bytes: Output kept per command (head and tail).
        env: Environment for the commands; None inherits the agent's environment.
        allow_launchers: Accept programs that run other programs (shells, interpreters,
            ``env``, ``xargs``...) in ``allowed_executables``, knowing that this allows
            everything.
        sandbox: ``"bwrap"``: run every command inside bubblewrap (must be installed).
        sandbox_network: Let sandboxed commands use the network.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        allowed_executables: Iterable[str] | None = None,
        allow_shell: bool = False,
        default_timeout: float = 60.0,
        max_timeout: float = 600.0,
        max_output_bytes: int = 30_000,
        env: Mapping[str, str] | None = None,
        allow_launchers: bool = False,
        sandbox: str | None = None,
        sandbox_network: bool = False,
    ) -> None:
        resolved = Path(os.path.realpath(root))
        if not resolved.is_dir():
            raise NotADirectoryError(f"shell root {str(root)!r} is not a directory")
        if allow_shell and allowed_executables is not None:
            raise ValueError("allow_shell=True would bypass allowed_executables; choose one")
        self.root = resolved
        self.allow_shell = allow_shell
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.max_output_bytes = max_output_bytes
        self.env = dict(env) if env is not None else None
        self.allowed: frozenset[str] | None = None
        if allowed_executables is not None:
            self.allowed = frozenset(self._allowed_paths(allowed_executables, allow_launchers))
        self.sandbox = sandbox_program(sandbox) if sandbox is not None else None
        self.sandbox_network = sandbox_network

    def _search_path(self) -> str | None:
        return (self.env if self.env is not None else os.environ).get("PATH")

    def _allowed_paths(self, names: Iterable[str], allow_launchers: bool) -> Iterable[str]:
        for name in names:
            found = shutil.which(name, path=self._search_path())
            if found is None:
                raise FileNotFoundError(f"allowed executable {name!r} was not found on PATH")
            real = os.path.realpath(found)
            launcher = {os.path.basename(name), os.path.basename(real)} & LAUNCHERS
            if launcher and not allow_launchers:
                raise ValueError(
                    f"{name!r} runs other programs, so allowing it allows everything; pass "
                    "allow_launchers=True to accept that (or use sandbox='bwrap')"
                )
            yield real

    async def run_command(
        self,
        command: str | list[str],
        cwd: str = ".",
        timeout: float | None = None,  # noqa: ASYNC109  (a tool argument, not a wait)
        ctx: ToolContext | None = None,
    ) -> str:
        """Run a command and return its output and exit code.

        Args:
            command: The command line (split like a POSIX shell would) or an argument list.
            cwd: Working directory, relative to the root directory.
            timeout: Seconds before the command is killed.
            ctx: Injected by the Toolkit (hidden from the model): output streams as progress.
        """
        argv = self._argv(command)
        workdir = resolve_inside(self.root, cwd or ".")
        if not workdir.is_dir():
            raise NotADirectoryError(f"cwd {cwd!r} is not a directory (or does not exist)")
        env = self.env
        if self.allowed is not None:
            program = self._check_allowed(argv[0], workdir)
            check_arguments(program, argv)
            if os.path.basename(program) == "git":
                env = git_environment(dict(env if env is not None else os.environ))
        if self.sandbox is not None:
            argv = sandbox_argv(
                self.sandbox, str(self.root), str(workdir), argv, self.sandbox_network
            )
        limit = self.default_timeout if timeout is None else timeout
        if limit <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        limit = min(limit, self.max_timeout)
        try:
            result = await run_capped(
                argv,
                cwd=str(workdir),
                env=env,
                timeout_s=limit,
                max_output_bytes=self.max_output_bytes,
                on_output=ctx.emit_progress if ctx is not None else None,
            )
        except FileNotFoundError:
            raise FileNotFoundError(f"command not found: {escape_name(argv[0])!r}") from None
        except PermissionError:
            raise PermissionError(f"permission denied running {escape_name(argv[0])!r}") from None
        return result.describe(limit)

    def _argv(self, command: str | list[str]) -> list[str]:
        if isinstance(command, list):
            argv = [str(part) for part in command]
        elif self.allow_shell:
            argv = ["/bin/sh", "-c", command] if command.strip() else []
        else:
            try:
                argv = shlex.split(command)
            except ValueError as exc:  # unbalanced quotes
                raise ValueError(f"cannot parse the command line: {exc}") from None
        if not argv or not argv[0]:
            raise ValueError("the command is empty")
        if any("\x00" in part for part in argv):
            raise ValueError("the command contains a NUL byte")
        return argv

    def _check_allowed(self, program: str, workdir: Path) -> str:
        assert self.allowed is not None
        if "/" in program:
            candidate: str | None = str(workdir / program)
        else:
            candidate = shutil.which(program, path=self._search_path())
        real = os.path.realpath(candidate) if candidate is not None else None
        if real is None or real not in self.allowed:
            raise PermissionError(f"{escape_name(program)!r} is not an allowed executable")
        return real


def toolkit(
    root: str | os.PathLike[str],
    *,
    requires_approval: bool = True,
    group: str = "basic",
    into: Toolkit | None = None,
    **options: Any,
) -> Toolkit:
    """Build a Toolkit with a ``run_command`` tool.

    Args:
        root: Commands run in this directory or below it.
        requires_approval: A human must approve each command (the default).
        group: Tool group to register the tool in.
        into: Register into this Toolkit instead of a new one.
        **options: Keyword arguments for :class:`Shell` (``allowed_executables``,
            ``allow_shell``, ``default_timeout``, ``max_output_bytes``, ``env``...).

    Returns:
        The Toolkit holding the tool.
    """
    sh = Shell(root, **options)
    tk = target_toolkit(into, group, f"Run commands in {sh.root}")
    tool = tk.register_tool_function(
        sh.run_command, group=group, requires_approval=requires_approval
    )
    # Whatever the allow-list, a command can modify or delete files and reach the network.
    annotate(tool, title="Run command", read_only=False, destructive=True, open_world=True)
    return tk


def main(argv: list[str] | None = None) -> None:
    """Serve ``run_command`` over MCP: ``python -m toolkits.shell --root DIR``."""
    from toolkits._cli import add_root_arguments, base_parser, root_from_args, serve_from_args

    parser = base_parser("toolkits.shell", "Serve agentkit's run_command tool over MCP.")
    add_root_arguments(parser, "commands run in this directory")
    parser.add_argument(
        "--allow", action="append", metavar="EXE", help="allowed executable (repeatable)"
    )
    parser.add_argument("--allow-shell", action="store_true", help="run strings via /bin/sh -c")
    parser.add_argument("--timeout", type=float, default=60.0, help="default timeout (s)")
    parser.add_argument("--sandbox", choices=["bwrap"], help="run every command inside bubblewrap")
    parser.add_argument(
        "--allow-launchers",
        action="store_true",
        help="accept shells/interpreters/env in --allow (this allows everything)",
    )
    args = parser.parse_args(argv)
    args.root = root_from_args(parser, args)
    # Over MCP the client's host is the one that asks a human, so no approval flag here.
    serve_from_args(
        parser,
        args,
        lambda: toolkit(
            args.root,
            requires_approval=False,
            allowed_executables=args.allow,
            allow_shell=args.allow_shell,
            default_timeout=args.timeout,
            sandbox=args.sandbox,
            allow_launchers=args.allow_launchers,
        ),
        name="agentkit-shell",
    )


if __name__ == "__main__":
    main()
