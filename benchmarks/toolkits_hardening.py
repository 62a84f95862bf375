"""Cost of the toolkit hardening (issue 13), as ratios against raw baselines in the same run.

``python -m benchmarks.toolkits_hardening`` prints, for each hardened path, the time of the
toolkit and of the plain-Python baseline it replaced or wraps:

- ``grep`` on RE2 vs a loop with stdlib ``re`` over the same lines (benign pattern);
- ``run_command("true")`` (supervisor, subreaper) vs a bare ``anyio.run_process(["true"])``;
- ``html_to_text`` (lexbor) vs stdlib ``html.parser`` feeding the same page;
- ``read_file`` (openat walk) vs ``open().readlines()`` of the same file.

Also the pathological inputs of the issue, which have no baseline (they froze it).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from pathlib import Path

import anyio

from toolkits._html import html_to_text
from toolkits.filesystem import FileSystem
from toolkits.shell import Shell


async def _best(fn: Callable[[], Awaitable[object]], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _row(name: str, mine: float, base: float) -> None:
    print(f"{name:<34} {mine * 1000:9.2f} ms  baseline {base * 1000:9.2f} ms  x{mine / base:6.2f}")


async def _grep(root: Path, fs: FileSystem) -> None:
    text = "".join(f"line {i} with some words and a number {i * 7}\n" for i in range(200_000))
    (root / "big.txt").write_text(text)

    async def baseline() -> object:
        pattern = re.compile(r"number \d+x$")  # matches nothing: every line is searched
        return [line for line in text.splitlines() if pattern.search(line)]

    mine = await _best(lambda: fs.grep(r"number \d+x$", path="big.txt"))
    _row("grep 200k lines (RE2 vs re)", mine, await _best(baseline))


async def _shell(root: Path) -> None:
    sh = Shell(root)
    mine = await _best(lambda: sh.run_command("true"), repeat=10)
    base = await _best(lambda: anyio.run_process(["true"]), repeat=10)
    _row("run_command('true') vs spawn", mine, base)


async def _html() -> None:
    page = "<html><body>" + "<div><p>Hello <a href='/x'>link</a> text</p></div>" * 5000
    page += "</body></html>"

    async def baseline() -> object:
        parser = HTMLParser()
        parser.feed(page)
        parser.close()
        return None

    async def mine() -> object:
        return html_to_text(page, "http://example.com/")

    _row("html_to_text 280 KB (vs html.parser)", await _best(mine), await _best(baseline))


async def _read(root: Path, fs: FileSystem) -> None:
    (root / "deep" / "a" / "b" / "c").mkdir(parents=True)
    target = root / "deep" / "a" / "b" / "c" / "f.txt"
    target.write_text("x\n" * 1000)

    async def baseline() -> object:
        with target.open() as fh:
            return fh.readlines()

    mine = await _best(lambda: fs.read_file("deep/a/b/c/f.txt"), repeat=20)
    _row("read_file 4 levels deep (vs open)", mine, await _best(baseline, repeat=20))


async def _pathological(root: Path, fs: FileSystem) -> None:
    (root / "redos.txt").write_text("a" * 28 + "!\n")
    (root / ("a" * 90)).write_text("x")
    for name, call in [
        ("grep ^(a+)+$ (29-char line)", lambda: fs.grep("^(a+)+$", path="redos.txt")),
        ("glob *a*a*a*a*a*a*b (90-char name)", lambda: fs.glob("*a*a*a*a*a*a*b")),
    ]:
        print(f"{name:<34} {await _best(call) * 1000:9.2f} ms  (froze for 10-17 s before)")
    page = "<p>before</p><![" + "<a" * 100_000

    async def hostile() -> object:
        return html_to_text(page)

    took = await _best(hostile) * 1000
    print(f"{'html_to_text 195 KiB <![ page':<34} {took:9.2f} ms  (minutes before)")


async def main() -> None:
    """Run every measurement once and print the table."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fs = FileSystem(root)
        await _grep(root, fs)
        await _shell(root)
        await _html()
        await _read(root, fs)
        await _pathological(root, fs)


if __name__ == "__main__":
    anyio.run(main)
