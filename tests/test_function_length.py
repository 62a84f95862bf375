"""No function in agentkit/ grows past a screenful of code (#26: split by responsibility).

A function's length is its code lines: lines holding a token other than a comment, with
the docstrings (its own and those of the functions and classes nested in it) left out,
so a thorough docstring never counts against it.
"""

from __future__ import annotations

import ast
import functools
import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentkit"

LIMIT = 80
"""Most code lines a function body may have."""

ALLOWED: dict[str, str] = {}
"""``"path/to/module.py:function"`` of each function allowed past ``LIMIT``, and why."""

_LAYOUT = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers of every docstring in the module."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _code_lines(source: str, docstrings: set[int]) -> set[int]:
    """The line numbers holding code: a token that is not layout, a comment or a docstring."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _LAYOUT:
            continue
        lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return lines


@functools.cache  # both tests read it; measuring the package once is enough
def function_lengths() -> dict[str, int]:
    """``"path:function"`` to its body's code lines, in each file with a body near the limit."""
    lengths: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        name = path.relative_to(PACKAGE.parent).as_posix()
        bodies = {
            node: range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        # Tokenizing is the slow part: only files with a body spanning past the limit
        # (a span is at least its code lines) are measured exactly.
        if all(len(body) <= LIMIT for body in bodies.values()):
            continue
        code = _code_lines(source, _docstring_lines(tree))
        for node, body in bodies.items():
            key = f"{name}:{node.name}"
            lengths[key] = max(lengths.get(key, 0), len(code.intersection(body)))
    return lengths


def test_no_function_is_longer_than_the_limit() -> None:
    lengths = function_lengths()
    long = {k: n for k, n in lengths.items() if n > LIMIT and k not in ALLOWED}
    assert not long, f"functions over {LIMIT} code lines (split them by responsibility): {long}"


def test_the_allow_list_names_only_long_functions() -> None:
    lengths = function_lengths()
    stale = sorted(k for k in ALLOWED if lengths.get(k, 0) <= LIMIT)
    assert not stale, f"allowed but no longer over {LIMIT} code lines (drop them): {stale}"


def test_the_measure_counts_code_not_docstrings_or_comments() -> None:
    source = (
        "def f():\n"
        '    """A docstring\n\n    over lines."""\n'
        "    # a comment\n"
        "    x = (\n"
        "        1\n"
        "    )\n"
        "\n"
        "    def g():\n"
        '        """Nested."""\n'
        "        return x\n"
        "    return g\n"
    )
    tree = ast.parse(source)
    code = _code_lines(source, _docstring_lines(tree))
    f = tree.body[0]
    assert isinstance(f, ast.FunctionDef)
    assert len(code.intersection(range(f.body[0].lineno, (f.end_lineno or 0) + 1))) == 6
