"""What an executable allow-list can and cannot promise, and the sandbox that can.

An allow-list says which *program* starts; many programs run other programs on request
(``git -c alias.x='!cmd' x``, ``find -exec``, ``tar --to-command``). This module refuses the
known ways for the programs people commonly allow, refuses allow-listing programs whose job
is to run other programs (``env``, ``xargs``, shells, interpreters) unless the caller says it
understands, and wraps commands in a real sandbox (bubblewrap) when asked. It is a list of
known escape hatches, not a proof: the sandbox is the boundary, the allow-list a convenience.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

__all__ = ["LAUNCHERS", "check_arguments", "git_environment", "sandbox_argv", "sandbox_program"]

# Programs whose purpose is running other programs: allow-listing one allows everything.
LAUNCHERS = frozenset(
    {
        "env", "xargs", "nice", "nohup", "timeout", "time", "stdbuf", "setsid", "sudo", "doas",
        "su", "chroot", "unshare", "nsenter", "sh", "bash", "dash", "zsh", "ksh", "fish", "csh",
        "tcsh", "busybox", "python", "python3", "perl", "ruby", "node", "deno", "bun", "php",
        "lua", "awk", "gawk", "mawk", "nawk", "tclsh", "expect", "watch", "parallel", "make",
        "ssh", "script", "flock", "strace", "ltrace", "gdb", "vim", "vi", "nvim", "emacs",
    }
)  # fmt: skip

# git subcommands that are built in (not aliases, which a repository's config can define).
_GIT_BUILTINS = frozenset(
    {
        "add", "am", "annotate", "apply", "archive", "bisect", "blame", "branch", "bundle",
        "cat-file", "check-ignore", "checkout", "cherry", "cherry-pick", "clean", "clone",
        "commit", "config", "count-objects", "describe", "diff", "diff-files", "diff-index",
        "diff-tree", "fetch", "for-each-ref", "format-patch", "fsck", "gc", "grep", "hash-object",
        "help", "init", "log", "ls-files", "ls-remote", "ls-tree", "merge", "merge-base", "mv",
        "notes", "pull", "push", "range-diff", "rebase", "reflog", "remote", "reset", "restore",
        "rev-list", "rev-parse", "revert", "rm", "shortlog", "show", "show-ref", "stash",
        "status", "submodule", "switch", "tag", "version", "whatchanged", "worktree",
    }
)  # fmt: skip
# Options that make git run a program, or act outside the working directory.
_GIT_GLOBAL_REFUSED = ("-c", "--config-env", "--exec-path", "-C", "--git-dir", "--work-tree")
_GIT_ANYWHERE_REFUSED = (
    "--upload-pack", "--receive-pack", "--exec", "--ext-diff", "--config",
    "--template", "--separate-git-dir", "--textconv", "--output",
)  # fmt: skip
_FIND_REFUSED = ("-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
_TAR_REFUSED = (
    "--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--rsh-command",
    "--info-script", "-F", "--new-volume-script",
)  # fmt: skip
_RSYNC_REFUSED = ("-e", "--rsh", "--rsync-path")
_ZIP_REFUSED = ("-T", "-TT", "--unzip-command", "--test")


def _refuse(option: str, program: str, why: str) -> str:
    return f"{program} {option} is refused by the allow-list guard: {why}"


def _has_option(args: list[str], options: tuple[str, ...]) -> str | None:
    for arg in args:
        if arg == "--":
            return None
        for option in options:
            long_form = option.startswith("--")
            if arg == option or (long_form and arg.startswith(option + "=")):
                return option
            if not long_form and len(option) == 2 and arg.startswith(option) and arg[1] != "-":
                return option  # "-cfoo" is "-c foo"
    return None


def _check_git(args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if hit := _has_option([args[i]], _GIT_GLOBAL_REFUSED):
            return _refuse(hit, "git", "it can run any program or leave the root directory")
        i += 1
    if i < len(args) and args[i] not in _GIT_BUILTINS:
        return _refuse(
            args[i], "git", "not a known built-in command (an alias can run any program)"
        )
    refused = (*_GIT_ANYWHERE_REFUSED, "-c", "-u") if args[i : i + 1] == ["clone"] else None
    if hit := _has_option(args[i + 1 :], refused or _GIT_ANYWHERE_REFUSED):
        return _refuse(hit, "git", "it can run another program or write elsewhere")
    return None


def _simple(program: str, options: tuple[str, ...], why: str) -> Callable[[list[str]], str | None]:
    def check(args: list[str]) -> str | None:
        hit = _has_option(args, options)
        return _refuse(hit, program, why) if hit else None

    return check


_CHECKS: dict[str, Callable[[list[str]], str | None]] = {
    "git": _check_git,
    "find": _simple("find", _FIND_REFUSED, "it runs programs or writes files"),
    "tar": _simple("tar", _TAR_REFUSED, "it runs another program"),
    "rsync": _simple("rsync", _RSYNC_REFUSED, "it runs another program"),
    "zip": _simple("zip", _ZIP_REFUSED, "it runs another program"),
}


def check_arguments(program_path: str, argv: list[str]) -> None:
    """Refuse the known ways an allowed program runs something else.

    Raises:
        PermissionError: The arguments use a refused option, with the reason.
    """
    check = _CHECKS.get(os.path.basename(program_path))
    if check is not None and (problem := check(argv[1:])):
        raise PermissionError(problem)


def git_environment(env: dict[str, str]) -> dict[str, str]:
    """Environment that stops git from running configured helpers (pager, hooks via env).

    A repository's own config can still name programs (``core.fsmonitor``, hooks): the
    allow-list guard cannot vouch for files the agent can write; use the sandbox for that.
    """
    safe = dict(env)
    safe.update(
        {
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_EDITOR": "false",
            "GIT_SEQUENCE_EDITOR": "false",
            "GIT_ASKPASS": "false",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            # Command-line config wins over the repository's: no hooks, no fsmonitor, no ssh.
            "GIT_CONFIG_COUNT": "3",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": "/dev/null",
            "GIT_CONFIG_KEY_1": "core.fsmonitor",
            "GIT_CONFIG_VALUE_1": "false",
            "GIT_CONFIG_KEY_2": "core.sshCommand",
            "GIT_CONFIG_VALUE_2": "false",
        }
    )
    for key in ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND"):
        safe.pop(key, None)
    return safe


_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")


def sandbox_program(kind: str) -> str:
    """The sandbox program for ``kind`` (only ``"bwrap"``), or a clear error.

    Raises:
        ValueError: Unknown kind.
        FileNotFoundError: bubblewrap is not installed.
    """
    if kind not in ("bwrap", "bubblewrap"):
        raise ValueError(f"unknown sandbox {kind!r}; the supported one is 'bwrap' (bubblewrap)")
    found = shutil.which("bwrap")
    if found is None:
        raise FileNotFoundError(
            "sandbox='bwrap' needs bubblewrap, which is not installed (no 'bwrap' on PATH): "
            "install it (e.g. apt install bubblewrap) or run without a sandbox"
        )
    return found


def sandbox_argv(bwrap: str, root: str, cwd: str, argv: list[str], network: bool) -> list[str]:
    """``argv`` wrapped in bubblewrap: system directories read-only, ``root`` writable.

    Nothing else of the host file system is visible (no home directory, no other projects);
    ``/tmp`` is a private tmpfs; other namespaces (PIDs, IPC, network unless ``network``) are
    new, and the sandbox dies with its parent.
    """
    out = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
    if network:
        out.append("--share-net")
    for directory in _SYSTEM_DIRS:
        if os.path.isdir(directory):
            # A symlinked /bin (merged /usr) must stay a symlink inside, or paths break.
            if os.path.islink(directory):
                out += ["--symlink", os.readlink(directory), directory]
            else:
                out += ["--ro-bind", directory, directory]
    out += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    out += ["--bind", root, root, "--chdir", cwd, "--setenv", "HOME", root, "--", *argv]
    return out
