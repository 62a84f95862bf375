#!/usr/bin/env python3
"""Report how often ``typing.Any`` appears in the library, per directory and per 1,000 lines.

Counts the name ``Any`` in code (imports, annotations, ``typing.Any``) and inside string
annotations, but not in comments or docstrings, so prose about "Any" does not skew the figure.

Usage: ``python scripts/any_density.py [ROOT]`` (default ``agentkit``); ``--files`` also lists
the files with the most occurrences.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

_WORD = re.compile(r"\bAny\b")
# Tokens after which a string literal starts a statement (a docstring or a bare string).
_STATEMENT_START = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT}


def count_any(source: str) -> int:
    """Return how many times ``Any`` is used in code or string annotations of ``source``."""
    count = 0
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string == "Any":
            count += 1
        elif token.type == tokenize.STRING and previous not in _STATEMENT_START:
            count += len(_WORD.findall(token.string))
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return count


def main(argv: list[str] | None = None) -> int:
    """Print the per-directory table and the library-wide density."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="agentkit")
    parser.add_argument("--files", action="store_true", help="list the top files too")
    args = parser.parse_args(argv)
    root = Path(args.root)
    per_dir: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_file: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n")
        hits = count_any(source)
        rel = path.relative_to(root)
        key = rel.parts[0] if len(rel.parts) > 1 else "(top-level)"
        per_dir[key][0] += hits
        per_dir[key][1] += lines
        per_file.append((hits, str(path)))
    total_hits = sum(v[0] for v in per_dir.values())
    total_lines = sum(v[1] for v in per_dir.values())
    print(f"{'directory':<16} {'Any':>6} {'lines':>7} {'per 1k':>7}")
    for key, (hits, lines) in sorted(per_dir.items(), key=lambda kv: -kv[1][0]):
        print(f"{key:<16} {hits:>6} {lines:>7} {1000 * hits / max(lines, 1):>7.1f}")
    density = 1000 * total_hits / max(total_lines, 1)
    print(f"{'TOTAL':<16} {total_hits:>6} {total_lines:>7} {density:>7.1f}")
    if args.files:
        print()
        for hits, name in sorted(per_file, reverse=True)[:30]:
            if hits:
                print(f"{hits:>5}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
