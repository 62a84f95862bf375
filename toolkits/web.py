"""Fetch a web page as text: HTML made readable, JSON pretty-printed, binary refused.

Only ``http`` and ``https`` URLs are fetched. By default a URL whose host resolves to a
private, loopback, link-local (cloud metadata such as 169.254.169.254), multicast, reserved
or otherwise non-global address is refused, and every redirect hop is checked the same way
(redirects are followed by hand, at most ``max_redirects``). The connection goes to the very
address that was checked (the hostname still drives ``Host`` and TLS verification), so a
DNS answer that changes between the check and the connection cannot redirect the request
to an internal service.

The body is streamed and cut at ``max_bytes``; the whole fetch has one deadline, which also
bounds the HTML-to-text conversion (linear time, in a worker thread).

Use it locally::

    from toolkits import web
    toolkit = web.toolkit()

or serve it over MCP: ``python -m toolkits.web``.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from agentkit.tools import Toolkit, annotate
from toolkits._common import decode_text, looks_binary, target_toolkit
from toolkits._html import html_to_text

if TYPE_CHECKING:
    import httpx2

__all__ = ["FetchError", "WebFetcher", "is_public_address", "main", "toolkit"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = frozenset(
    {
        "application/xml", "application/javascript", "application/ecmascript",
        "application/x-javascript", "application/yaml", "application/x-yaml", "application/toml",
        "application/x-sh", "application/sql", "application/graphql", "application/csv",
        "application/x-ndjson", "application/rss+xml", "application/atom+xml",
    }
)  # fmt: skip


class FetchError(Exception):
    """The page could not be fetched (HTTP error, refused address, unsupported content)."""


@dataclass(slots=True)
class _Fetched:
    url: str
    status: int
    mime: str
    charset: str | None
    body: bytes
    truncated: bool


def is_public_address(address: str) -> bool:
    """True if ``address`` is a globally routable unicast IP (what the fetcher allows)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None:
            return is_public_address(str(embedded))
        if ip.teredo is not None:
            return False
    return ip.is_global and not (
        ip.is_multicast or ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved
    )


class WebFetcher:
    """Fetches URLs for a model.

    Args:
        allow_private: Also fetch private/loopback/link-local addresses (tests, intranets).
        trusted_hosts: Host names (or IP literals) exempt from the address check, e.g. an
            intranet wiki; redirects to any other private host are still refused.
        timeout: Deadline in seconds for the whole fetch, redirects included.
        max_bytes: Body bytes read at most; the rest is not downloaded.
        max_chars: Characters of text returned per call (the model pages with ``start``).
        max_redirects: Redirect hops followed.
        user_agent: ``User-Agent`` header.
        verify: TLS verification: True (system CAs), or an ``ssl.SSLContext`` trusting a
            private CA. Never disable it for a model-driven fetcher.
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        trusted_hosts: Iterable[str] = (),
        timeout: float = 30.0,
        max_bytes: int = 5 * 1024 * 1024,
        max_chars: int = 40_000,
        max_redirects: int = 5,
        user_agent: str = "agentkit-web/0.1 (+https://github.com/agentkit)",
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.allow_private = allow_private
        self.trusted_hosts = frozenset(h.lower().strip("[]") for h in trusted_hosts)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_chars = max_chars
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        self.verify = verify

    async def fetch_url(self, url: str, start: int = 0) -> str:
        """Fetch a web page or text document and return its content as text.

        HTML is converted to readable text (links kept as 'text (url)'), JSON is
        pretty-printed; binary content such as images or PDFs is refused. Long documents are
        returned in parts: call again with `start` to continue.

        Args:
            url: The http:// or https:// URL.
            start: Character offset to start from, for long documents.
        """
        if start < 0:
            raise ValueError("start must be >= 0")
        try:
            with anyio.fail_after(self.timeout):
                fetched = await self._fetch(url)
                # Converting is CPU work: in a worker thread (the event loop stays free) and
                # under the same deadline (an interrupt or the timeout returns at once).
                return await anyio.to_thread.run_sync(
                    self._render, fetched, start, abandon_on_cancel=True
                )
        except TimeoutError:
            raise FetchError(f"fetching {url} took longer than {self.timeout:g} s") from None

    async def _fetch(self, url: str) -> _Fetched:
        import httpx2

        try:
            current = httpx2.URL(url)
        except httpx2.InvalidURL as exc:
            raise FetchError(f"invalid URL {url!r}: {exc}") from None
        async with httpx2.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=self.timeout, verify=self.verify
        ) as client:
            for _hop in range(self.max_redirects + 1):
                address = await self._checked_address(current)
                # Cookies would be filed under the pinned IP, not the host: keep none.
                client.cookies.clear()
                request = _pinned_request(client, current, address, self.user_agent)
                try:
                    response = await client.send(request, stream=True)
                except httpx2.HTTPError as exc:
                    raise FetchError(f"cannot fetch {current}: {exc!r}") from None
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        current = current.join(location)
                        continue
                    return await self._read(current, response)
                except httpx2.HTTPError as exc:  # the body failed mid-stream
                    raise FetchError(f"error reading {current}: {exc!r}") from None
                finally:
                    await response.aclose()
        raise FetchError(f"more than {self.max_redirects} redirects, last to {current}")

    async def _checked_address(self, url: httpx2.URL) -> str:
        """Resolve the URL's host; refuse bad schemes and (by default) non-public addresses."""
        if url.scheme not in ("http", "https"):
            raise FetchError(f"only http:// and https:// URLs can be fetched, not {url.scheme!r}")
        host = url.raw_host.decode("ascii")
        if not host:
            raise FetchError(f"the URL {url} has no host")
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise FetchError(f"cannot resolve host {host!r}: {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise FetchError(f"host {host!r} has no address")
        if self.allow_private or host.lower() in self.trusted_hosts:
            return addresses[0]
        for address in addresses:
            if not is_public_address(address):
                resolves = "is" if address == host else f"resolves to {address},"
                raise FetchError(
                    f"refusing to fetch {url}: {host} {resolves} a private, loopback, "
                    "link-local or reserved address"
                )
        return addresses[0]

    async def _read(self, url: httpx2.URL, response: httpx2.Response) -> _Fetched:
        mime = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if response.status_code < 400 and mime and _kind(mime) == "binary":
            raise FetchError(
                f"{url} is binary content ({mime}); only text, HTML and JSON can be fetched"
            )
        body = bytearray()
        truncated = False
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.max_bytes:
                del body[self.max_bytes :]
                truncated = True
                break
        shown = str(url.copy_with(userinfo=b""))  # never echo credentials to the model
        fetched = _Fetched(
            shown, response.status_code, mime, response.charset_encoding, bytes(body), truncated
        )
        if response.status_code >= 400:
            excerpt = decode_text(fetched.body[:4000], fetched.charset or "utf-8")
            if _kind(mime) == "html":
                excerpt = html_to_text(excerpt)
            excerpt = excerpt.strip()[:1000]
            raise FetchError(
                f"HTTP {response.status_code} {response.reason_phrase} for {shown}"
                + (f"\n{excerpt}" if excerpt else "")
            )
        return fetched

    def _render(self, fetched: _Fetched, start: int) -> str:
        kind = _kind(fetched.mime) if fetched.mime else _sniff(fetched.body)
        if kind == "binary":
            raise FetchError(f"{fetched.url} is binary content; only text can be fetched")
        text = decode_text(fetched.body, fetched.charset or "utf-8")
        note = ""
        if kind == "html":
            text = html_to_text(text, fetched.url)
        elif kind == "json" and not fetched.truncated:
            try:
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pass  # not valid JSON after all: show it as is
            except RecursionError:
                # The stdlib parser recurses per nesting level: a hostile (or odd) body can
                # nest past the interpreter's limit. The model still gets the text.
                note = "[JSON nested too deeply to pretty-print: shown as sent]\n"
        header = f"URL: {fetched.url}\nContent-Type: {fetched.mime or 'unknown'}\n{note}"
        if fetched.truncated:
            header += f"[the document was cut at {self.max_bytes} bytes]\n"
        if start >= len(text) and text:
            return header + f"\n[start={start} is past the end ({len(text)} characters)]"
        part = text[start : start + self.max_chars]
        end = start + len(part)
        if end < len(text):
            part += (
                f"\n\n[... {len(text) - end} more characters; call fetch_url with "
                f"start={end} to continue]"
            )
        return f"{header}\n{part}"


def _pinned_request(
    client: httpx2.AsyncClient, url: httpx2.URL, address: str, user_agent: str
) -> httpx2.Request:
    """A request that connects to ``address`` but names the URL's host (Host header, SNI)."""
    host = url.raw_host.decode("ascii")
    headers = {"Host": url.netloc.decode("ascii"), "User-Agent": user_agent, "Accept": "*/*"}
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    return client.build_request(
        "GET", url.copy_with(host=address), headers=headers, extensions=extensions
    )


def _kind(mime: str) -> str:
    if mime in ("text/html", "application/xhtml+xml"):
        return "html"
    if mime == "application/json" or mime.endswith("+json"):
        return "json"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith("+xml"):
        return "text"
    return "binary"


def _sniff(body: bytes) -> str:
    """Content type unknown: text if it has no NUL byte and is UTF-8 (a cut char allowed)."""
    if looks_binary(body[:8192]):
        return "binary"
    try:
        body[:8192].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(body[:8192]) - 4:
            return "binary"
    head = body[:512].lstrip().lower()
    return "html" if head.startswith((b"<!doctype html", b"<html")) else "text"


def toolkit(
    *,
    group: str = "basic",
    into: Toolkit | None = None,
    **options: Any,
) -> Toolkit:
    """Build a Toolkit with a ``fetch_url`` tool.

    Args:
        group: Tool group to register the tool in.
        into: Register into this Toolkit instead of a new one.
        **options: Keyword arguments for :class:`WebFetcher` (``allow_private``,
            ``trusted_hosts``, ``timeout``, ``max_bytes``, ``max_chars``, ``max_redirects``,
            ``user_agent``).

    Returns:
        The Toolkit holding the tool.
    """
    fetcher = WebFetcher(**options)
    tk = target_toolkit(into, group, "Fetch web pages as text")
    tool = tk.register_tool_function(fetcher.fetch_url, group=group)
    # Reads only, but what it returns comes from the open web (untrusted content).
    annotate(tool, title="Fetch URL", read_only=True, idempotent=True, open_world=True)
    return tk


def main(argv: list[str] | None = None) -> None:
    """Serve ``fetch_url`` over MCP: ``python -m toolkits.web``."""
    from toolkits._cli import base_parser, serve_from_args

    parser = base_parser("toolkits.web", "Serve agentkit's fetch_url tool over MCP.")
    parser.add_argument(
        "--allow-private", action="store_true", help="also fetch private/loopback addresses"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline per fetch (s)")
    args = parser.parse_args(argv)
    serve_from_args(
        parser,
        args,
        lambda: toolkit(allow_private=args.allow_private, timeout=args.timeout),
        name="agentkit-web",
    )


if __name__ == "__main__":
    main()
