"""toolkits.web: a hostile page cannot freeze the agent."""

from __future__ import annotations

import pytest

from tests._child_process import run_child
from toolkits._html import html_to_text

# What made html.parser give up (an unterminated "<![") followed by "<" after "<" with no
# ">": the old hand-written fallback stripped that in quadratic time (40 KiB: 6 s). This is
# the size, 195 KiB: minutes on the old code, a tenth of a second on lexbor.
_HOSTILE_EXPR = '"<html><body><p>before</p><![" + "<a" * 100_000'
_HOSTILE: str = eval(_HOSTILE_EXPR)

_FETCH_HOSTILE = """
    import sys, threading, anyio
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from toolkits.web import WebFetcher

    PAGE = eval(sys.argv[1]).encode()  # the page is built here: too big for an argument

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args): pass
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/page"

    async def main() -> None:
        fetcher = WebFetcher(allow_private=True, timeout=5)
        result = None
        ticks = 0

        async def fetch() -> None:
            nonlocal result
            result = await fetcher.fetch_url(url)

        async with anyio.create_task_group() as tg:
            tg.start_soon(fetch)
            while result is None and ticks < 500:
                await anyio.sleep(0.01)
                ticks += 1
            tg.cancel_scope.cancel()
        print("finished" if result is not None else "interrupted", ticks > 0)
        print(result)

    anyio.run(main)
"""


def test_hostile_page_does_not_freeze_the_event_loop() -> None:
    out = run_child(_FETCH_HOSTILE, _HOSTILE_EXPR)
    status, text = out.split("\n", 1)
    assert status == "finished True"
    assert "before" in text


def test_hostile_markup_converts_in_linear_time() -> None:
    # 3.5x the page (hours on the old code); lexbor: well under a second.
    assert html_to_text(_HOSTILE + "<a" * 250_000) == "before"


@pytest.mark.parametrize(
    ("html", "words"),
    [
        ("<![CDATA[x]]>ok", "ok"),
        ("<" * 100_000 + " ok", "ok"),
        ("<p>" + "<div>" * 50_000 + "deep" + "</div>" * 50_000, "deep"),
        ("<div>" * 50_000 + "<script>" + "<style>" * 50_000 + "deep", ""),
    ],
)
def test_malformed_or_deep_markup_keeps_the_words(html: str, words: str) -> None:
    # 50,000 levels: quadratic tree building would take minutes; past 512 levels the
    # document is reduced to its words by a linear stripper (scripts still dropped).
    text = html_to_text(html)
    assert text.endswith(words) and "<div>" not in text


def test_lone_surrogates_do_not_reach_the_parser() -> None:
    assert html_to_text("<p>a\ud800b</p>") == "a\ufffdb"
