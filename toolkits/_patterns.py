"""Patterns supplied by a model or a user, matched in linear time.

A regular expression such as ``^(a+)+$`` makes a backtracking engine (Python's ``re``) run
for an exponential time on a short line, holding the GIL: the whole process, event loop
included, freezes. Every pattern that comes from outside therefore runs on RE2 (the
``google-re2`` wheel), whose matching time is linear in the input. RE2 has no backreferences
and no lookaround; such a pattern is refused with a clear message instead.

Globs are translated to RE2 too, so ``*a*a*a*a*a*a*b`` against a long name is linear as well.
"""

from __future__ import annotations

from typing import Any, Protocol

import re2

__all__ = [
    "LinePattern",
    "PatternError",
    "UserPattern",
    "compile_glob",
    "compile_line_regex",
    "compile_regex",
    "glob_name_matcher",
]

# A pattern is a short thing; a megabyte one is a mistake or an attack on memory.
MAX_PATTERN_CHARS = 4096
# RE2's default memory budget for one compiled program (8 MiB) is generous already; keep it.
_MAX_MEM = 8 << 20


class PatternError(ValueError):
    """A pattern that cannot be used, with the reason in words."""


class UserPattern(Protocol):
    """What the tools need from a compiled pattern (``re2`` matches are enough)."""

    def search(self, text: str) -> object | None:
        """A match anywhere in ``text``, or None."""

    def fullmatch(self, text: str) -> object | None:
        """A match of the whole ``text``, or None."""


class LinePattern(Protocol):
    """A pattern searched over a whole UTF-8 buffer, never across a line break."""

    def search(self, data: bytes, pos: int) -> Any:
        """The first match at or after ``pos``, or None."""


def _options(ignore_case: bool = False, dot_nl: bool = False) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is raised to the caller; no stderr noise
    options.max_mem = _MAX_MEM
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_nl
    return options


def _compile(pattern: str, options: re2.Options, what: str) -> UserPattern:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(
            f"the {what} is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
        )
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise PatternError(f"the {what} contains a lone surrogate (not valid Unicode)") from None
    try:
        compiled: UserPattern = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise PatternError(
            f"unsupported or invalid {what} {pattern!r}: {reason}. Patterns use RE2 syntax "
            "(linear time): backreferences (\\1) and lookaround ((?=...), (?<!...)) are not "
            "supported"
        ) from None
    return compiled


def compile_regex(pattern: str, *, ignore_case: bool = False) -> UserPattern:
    """Compile a model-supplied regular expression on RE2.

    Args:
        pattern: The expression (Python/Perl-like syntax without backreferences/lookaround).
        ignore_case: Match case-insensitively.

    Returns:
        The compiled pattern; ``search`` runs in time linear in the text.

    Raises:
        PatternError: The pattern is too long, not valid Unicode, or uses syntax RE2 lacks.
    """
    return _compile(pattern, _options(ignore_case), "regular expression")


def compile_line_regex(pattern: str, *, ignore_case: bool = False) -> LinePattern:
    """Compile a regular expression to search a whole file, line by line in effect.

    Calling a pattern once per line costs more in the wrapper than the match itself; one
    search over the whole UTF-8 buffer is tens of times faster. ``never_nl`` keeps a match
    inside one line (as a per-line search would) and ``(?m)`` anchors ``^``/``$`` at lines.

    Raises:
        PatternError: The pattern is too long, not valid Unicode, or uses syntax RE2 lacks.
    """
    _compile(pattern, _options(ignore_case), "regular expression")  # the errors, in words
    options = _options(ignore_case)
    options.never_nl = True
    compiled: LinePattern = re2.compile(b"(?m)" + pattern.encode("utf-8"), options)
    return compiled


def compile_glob(pattern: str) -> UserPattern:
    """Compile a glob over POSIX relative paths (``fullmatch`` it against the path).

    ``**`` as a whole segment matches any number of directories; ``*``, ``?`` and ``[...]``
    match within one name (as in shells, unlike ``fnmatch`` where ``*`` crosses ``/``).

    Raises:
        PatternError: The glob is too long or not valid Unicode.
    """
    out: list[str] = []
    segments = pattern.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment_regex(segment))
        if not last:
            out.append("/")
    return _compile("".join(out), _options(dot_nl=True), "glob")


def glob_name_matcher(pattern: str) -> UserPattern:
    """A glob for one file name (``include='*.py'``): ``*`` does not cross ``/``.

    Raises:
        PatternError: The glob is too long or not valid Unicode.
    """
    return _compile(_segment_regex(pattern), _options(dot_nl=True), "glob")


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            # Runs of stars mean the same as one; collapsing keeps the program small.
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := segment.find("]", i + 2)) != -1:
            out.append(_char_class(segment[i + 1 : end]))
            i = end
        else:
            out.append(re2.escape(c))
        i += 1
    return "".join(out)


def _char_class(body: str) -> str:
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    # Escape every character but keep '-' ranges working: RE2 accepts "\-" as a literal
    # hyphen, so only the escaped hyphens between two characters are turned back into ranges.
    escaped = "".join("-" if c == "-" else _escape_class_char(c) for c in body)
    return f"[{'^' if negate else ''}{escaped}]"


def _escape_class_char(c: str) -> str:
    return "\\" + c if c in "\\]^[" else c
