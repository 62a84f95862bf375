"""toolkits.web: schemes, private/loopback/link-local refusal (redirects too), content types,
byte caps, timeouts, pagination, and the same results over MCP stdio.

A real HTTP server on 127.0.0.1 (stdlib, in a thread) plays the web; the fetcher reaches it
only with ``allow_private=True`` or ``trusted_hosts``, which is itself under test.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._toolkits_helpers import assert_same_over_mcp, call, stdio_client
from toolkits import web
from toolkits.web import FetchError, WebFetcher, is_public_address

DEEP_JSON = b"[" * 50_000 + b"]" * 50_000
HTML = b"""<!doctype html><html><head><title>Test page</title>
<script>document.write("EVIL SCRIPT")</script><style>body { color: red }</style></head>
<body><h1>Welcome</h1><p>Read <a href="/docs/intro">the intro</a> first.</p>
<ul><li>alpha</li><li>beta</li></ul></body></html>"""
STOP = threading.Event()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def send(self, status: int, ctype: str | None, body: bytes, **headers: str) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        # The fetcher hanging up (byte cap, timeout) is expected.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.route()

    def route(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        routes = {
            "/html": lambda: self.send(200, "text/html; charset=utf-8", HTML),
            "/json": lambda: self.send(200, "application/json", b'{"a": [1, 2], "b": "\xc3\xa9"}'),
            "/deep-json": lambda: self.send(200, "application/json", DEEP_JSON),
            "/latin1": lambda: self.send(
                200, "text/plain; charset=iso-8859-1", "café".encode("latin-1")
            ),
            "/bad-utf8": lambda: self.send(200, "text/plain; charset=utf-8", b"ok \xff\xfe end"),
            "/png": lambda: self.send(200, "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64)),
            "/untyped-binary": lambda: self.send(200, None, b"\x00\x01\x02binary"),
            "/untyped-text": lambda: self.send(200, None, b"just words"),
            "/long": lambda: self.send(200, "text/plain", b"0123456789" * 10_000),
            "/host": lambda: self.send(200, "text/plain", self.headers["Host"].encode()),
            "/missing": lambda: self.send(404, "text/plain", b"no such page"),
            "/redirect": lambda: self.send(302, "text/plain", b"", Location=query["to"][0]),
            "/loop": lambda: self.send(301, "text/plain", b"", Location="/loop"),
            "/infinite": self.infinite,
            "/slow": self.slow,
        }
        routes.get(url.path, lambda: self.send(404, "text/plain", b"unknown route"))()

    def infinite(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        chunk = b"y" * 65536
        while not STOP.is_set():
            self.wfile.write(chunk)

    def slow(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"first bytes ")
        self.wfile.flush()
        deadline = time.monotonic() + 30
        while not STOP.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    STOP.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        STOP.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fetcher() -> WebFetcher:
    return WebFetcher(allow_private=True, timeout=10)


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "data:text/plain,hi"],
)
async def test_non_http_schemes_are_refused(url: str) -> None:
    with pytest.raises(FetchError, match="only http:// and https://"):
        await WebFetcher(allow_private=True).fetch_url(url)


async def test_malformed_urls() -> None:
    with pytest.raises(FetchError):
        await WebFetcher().fetch_url("http:///no-host")
    with pytest.raises(FetchError):
        await WebFetcher().fetch_url("not a url at all")


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "169.254.169.254",  # cloud metadata
        "[::1]",
        "[::ffff:127.0.0.1]",
        "0.0.0.0",
        "10.1.2.3",
        "192.168.0.1",
        "100.64.0.1",
        "224.0.0.1",
        "[fe80::1]",
        "[2002:7f00:1::]",  # 6to4 wrapping 127.0.0.1
    ],
)
async def test_private_addresses_are_refused_by_default(host: str, base_url: str) -> None:
    port = base_url.rsplit(":", 1)[1]
    with pytest.raises(FetchError, match="private, loopback, link-local or reserved"):
        await WebFetcher(timeout=5).fetch_url(f"http://{host}:{port}/html")


def test_is_public_address() -> None:
    assert is_public_address("8.8.8.8")
    assert is_public_address("2606:4700:4700::1111")
    assert is_public_address("::ffff:8.8.8.8")
    for address in ("127.0.0.1", "169.254.169.254", "::1", "fc00::1", "::ffff:10.0.0.1", "::"):
        assert not is_public_address(address)


async def test_redirects_are_checked_at_every_hop(base_url: str) -> None:
    port = base_url.rsplit(":", 1)[1]
    trusting = WebFetcher(trusted_hosts=["127.0.0.1"], timeout=10)
    assert "Welcome" in await trusting.fetch_url(f"{base_url}/html")
    # Trusted 127.0.0.1 redirects to "localhost": same machine, but not a trusted name.
    with pytest.raises(FetchError, match="localhost resolves to"):
        await trusting.fetch_url(f"{base_url}/redirect?to=http://localhost:{port}/html")
    with pytest.raises(FetchError, match=r"169\.254\.169\.254 is a private"):
        await trusting.fetch_url(f"{base_url}/redirect?to=http://169.254.169.254/latest")
    with pytest.raises(FetchError, match="only http"):
        await trusting.fetch_url(f"{base_url}/redirect?to=file:///etc/passwd")


async def test_redirects_are_followed_and_bounded(fetcher: WebFetcher, base_url: str) -> None:
    page = await fetcher.fetch_url(f"{base_url}/redirect?to=/redirect%3Fto%3D/json")
    assert page.startswith(f"URL: {base_url}/json\n")
    with pytest.raises(FetchError, match="more than 5 redirects"):
        await fetcher.fetch_url(f"{base_url}/loop")


# -- content --------------------------------------------------------------------------------


async def test_html_becomes_readable_text(fetcher: WebFetcher, base_url: str) -> None:
    page = await fetcher.fetch_url(f"{base_url}/html")
    assert page.startswith(f"URL: {base_url}/html\nContent-Type: text/html\n\n# Test page\n")
    assert "# Welcome" in page
    assert f"Read the intro ({base_url}/docs/intro) first." in page
    assert "- alpha\n- beta" in page
    assert "EVIL SCRIPT" not in page
    assert "color: red" not in page


async def test_json_text_and_charsets(fetcher: WebFetcher, base_url: str) -> None:
    page = await fetcher.fetch_url(f"{base_url}/json")
    assert page.endswith("\n" + json.dumps({"a": [1, 2], "b": "é"}, indent=2, ensure_ascii=False))
    assert (await fetcher.fetch_url(f"{base_url}/latin1")).endswith("\ncafé")
    assert (await fetcher.fetch_url(f"{base_url}/bad-utf8")).endswith("ok \ufffd\ufffd end")
    assert (await fetcher.fetch_url(f"{base_url}/untyped-text")).endswith("\njust words")


async def test_json_too_deep_to_parse_is_shown_as_sent(fetcher: WebFetcher, base_url: str) -> None:
    # json.loads raises RecursionError on this body; the page is shown as sent, saying why.
    page = await fetcher.fetch_url(f"{base_url}/deep-json")
    note = "[JSON nested too deeply to pretty-print: shown as sent]\n"
    assert note in page
    assert page.split(note, 1)[1].startswith("\n" + "[" * 1000)


async def test_binary_is_refused(fetcher: WebFetcher, base_url: str) -> None:
    with pytest.raises(FetchError, match=r"binary content \(image/png\)"):
        await fetcher.fetch_url(f"{base_url}/png")
    with pytest.raises(FetchError, match="binary"):
        await fetcher.fetch_url(f"{base_url}/untyped-binary")


async def test_http_errors(fetcher: WebFetcher, base_url: str) -> None:
    with pytest.raises(FetchError, match=r"HTTP 404 Not Found .*\nno such page"):
        await fetcher.fetch_url(f"{base_url}/missing")


async def test_endless_body_is_capped(base_url: str) -> None:
    started = time.monotonic()
    page = await WebFetcher(allow_private=True, max_bytes=100_000).fetch_url(f"{base_url}/infinite")
    assert time.monotonic() - started < 10
    assert "[the document was cut at 100000 bytes]" in page
    assert "call fetch_url with start=40000" in page


async def test_slow_server_hits_the_deadline(base_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(FetchError, match="took longer than 1 s"):
        await WebFetcher(allow_private=True, timeout=1).fetch_url(f"{base_url}/slow")
    assert time.monotonic() - started < 10


async def test_long_documents_are_paged(base_url: str) -> None:
    fetcher = WebFetcher(allow_private=True, max_chars=40_000)
    first = await fetcher.fetch_url(f"{base_url}/long")
    assert "[... 60000 more characters; call fetch_url with start=40000 to continue]" in first
    last = await fetcher.fetch_url(f"{base_url}/long", start=80_000)
    assert last.endswith("\n" + "0123456789" * 2_000)
    assert "past the end" in await fetcher.fetch_url(f"{base_url}/long", start=200_000)


async def test_host_header_names_the_host_not_the_pinned_address(
    fetcher: WebFetcher, base_url: str
) -> None:
    port = base_url.rsplit(":", 1)[1]
    page = await fetcher.fetch_url(f"http://localhost:{port}/host")
    assert page.endswith(f"\nlocalhost:{port}")


# -- Toolkit and MCP ------------------------------------------------------------------------


async def test_toolkit_call_reports_refusals_as_errors(base_url: str) -> None:
    result = await call(web.toolkit(), "fetch_url", url="http://169.254.169.254/latest/meta-data/")
    assert result.is_error
    assert "link-local" in result.get_text()
    ok = await call(web.toolkit(allow_private=True), "fetch_url", url=f"{base_url}/json")
    assert not ok.is_error


async def test_same_results_locally_and_over_mcp_stdio(base_url: str) -> None:
    calls = [
        ("fetch_url", {"url": f"{base_url}/html"}),
        ("fetch_url", {"url": f"{base_url}/long", "start": 95_000}),
        ("fetch_url", {"url": f"{base_url}/png"}),
        ("fetch_url", {"url": "file:///etc/passwd"}),
    ]
    async with stdio_client("web", "--allow-private") as client:
        await assert_same_over_mcp(web.toolkit(allow_private=True), client, calls)
    async with stdio_client("web") as client:
        refused = await client.call_tool("fetch_url", {"url": f"{base_url}/html"})
        assert refused.is_error
        assert "refusing to fetch" in refused.get_text()


# -- TLS: the connection is pinned to the checked address, yet verified for the host name ----


def make_tls_files(directory: Path) -> tuple[Path, Path, Path]:
    """A private CA and a certificate for ``localhost`` (not for 127.0.0.1) signed by it."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agentkit test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = (
        directory / "ca.pem",
        directory / "cert.pem",
        directory / "key.pem",
    )
    ca_file.write_bytes(ca_cert.public_bytes(pem))
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, cert_file, key_file


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    ca_file, cert_file, key_file = make_tls_files(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1]), ca_file
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_https_is_verified_against_the_host_name(tls_server: tuple[int, Path]) -> None:
    port, ca_file = tls_server
    trusting_ca = ssl.create_default_context(cafile=str(ca_file))
    fetcher = WebFetcher(allow_private=True, timeout=10, verify=trusting_ca)
    # Connected to the pinned 127.0.0.1, verified as "localhost" (SNI and certificate).
    page = await fetcher.fetch_url(f"https://localhost:{port}/host")
    assert page.endswith(f"\nlocalhost:{port}")
    # The same server by IP: the certificate does not name 127.0.0.1, so TLS fails.
    with pytest.raises(FetchError, match="cannot fetch"):
        await fetcher.fetch_url(f"https://127.0.0.1:{port}/host")
    # Without the private CA the certificate is not trusted at all.
    with pytest.raises(FetchError, match="cannot fetch"):
        await WebFetcher(allow_private=True, timeout=10).fetch_url(f"https://localhost:{port}/")


# -- HTML conversion never fails ------------------------------------------------------------


_HTML_PARTS = [
    "<p>", "</p>", "<a href='/x'>", "</a>", "<script>", "</script>", "<![x y]>", "<!--", "-->",
    "<pre>", "</pre>", "&amp;", "&#0;", "<svg>", "<li>", "<title>", "</title>", "<br/>",
    "word", " ", "\n", "<!doctype html>", "<base href=x>", "<style>", "</style>", "<b>",
]  # fmt: skip
_PLAIN = st.text(st.characters(exclude_characters="<>&"), max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_HTML_PARTS) | _PLAIN, max_size=30),
    st.lists(st.sampled_from(_HTML_PARTS) | _PLAIN, max_size=30),
)
def test_html_to_text_never_shows_scripts(before: list[str], after: list[str]) -> None:
    from toolkits._html import html_to_text

    html = "".join(before) + "<script>SECRET</script>" + "".join(after)
    assert "SECRET" not in html_to_text(html, "http://example.com/")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.text(st.sampled_from("<>!-?/[]&#;ab =\"'"), max_size=60))
def test_html_to_text_accepts_any_input(text: str, markup: str) -> None:
    from toolkits._html import html_to_text

    assert isinstance(html_to_text(text + markup + text, "http://example.com/"), str)
