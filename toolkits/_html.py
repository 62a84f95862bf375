"""HTML to readable text with the standard library's ``html.parser``.

Scripts, styles and other non-content elements are dropped; block elements become line
breaks; headings, list items and table cells keep a light Markdown-like shape; links keep
their (absolute) target as ``text (url)`` so the model can follow them.
"""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import urljoin

__all__ = ["html_to_text"]

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object"})
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "fieldset",
        "figcaption", "figure", "footer", "form", "header", "hr", "main", "nav", "ol", "p",
        "section", "table", "ul", "h1", "h2", "h3", "h4", "h5", "h6", "pre",
        "details", "summary", "caption", "body", "html",
    }
)  # fmt: skip


class _TextExtractor(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: list[str] = []
        self.title: str | None = None
        self._skip_depth = 0
        self._pre_depth = 0
        self._in_title = False
        self._links: list[str | None] = []

    def close(self) -> None:
        # Whatever is left is an unterminated construct ("<!-- ...", "<a href=..."): a
        # browser shows none of it, while html.parser would emit it as text.
        if self.rawdata.startswith("<"):
            self.rawdata = ""
        super().close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if tag == "base" and (href := dict(attrs).get("href")):
            self.base_url = urljoin(self.base_url, href)
        if tag in _SKIP:
            self._skip_depth += 1
            return
        if self._skip_depth:
            return
        self._start_visible(tag, dict(attrs))

    def _start_visible(self, tag: str, attrs: dict[str, str | None]) -> None:
        if tag in _BLOCK:
            self.parts.append("\n")
        if tag == "br":
            self.parts.append("\n")
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.parts.append("#" * int(tag[1]) + " ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag == "tr":
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag == "pre":
            self._pre_depth += 1
        elif tag == "img" and attrs.get("alt"):
            self.parts.append(f"[image: {attrs['alt']}]")
        elif tag == "a":
            href = attrs.get("href")
            usable = href and not href.startswith(("javascript:", "#", "data:"))
            self._links.append(urljoin(self.base_url, href) if usable and href else None)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if tag in _SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
            return
        if self._skip_depth:
            return
        if tag == "a" and self._links:
            href = self._links.pop()
            if href:
                self.parts.append(f" ({href})")
        elif tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._in_title:
            self.title = (self.title or "") + data
            return
        if self._pre_depth:
            self.parts.append(data.replace("\n", "\x00"))  # protected from whitespace collapse
        else:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str, base_url: str = "") -> str:
    """Convert an HTML document to readable plain text.

    Args:
        html: The document.
        base_url: URL the document came from, to make relative links absolute.

    Returns:
        The text; the page title (if any) first, as a ``# Title`` line.
    """
    parser = _TextExtractor(base_url)
    try:
        parser.feed(html)
        parser.close()
    except AssertionError:  # html.parser gives up on some malformed markup ("<![x]>")
        return _strip_tags(html)
    text = "".join(parser.parts)
    lines = [line.strip(" ") for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip().replace("\x00", "\n")
    title = " ".join((parser.title or "").split())
    return f"# {title}\n\n{text}" if title else text


def _strip_tags(html: str) -> str:
    """Last resort for markup ``html.parser`` cannot handle: drop tags, keep the words."""
    html = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", html)
    text = unescape(re.sub(r"<[^>]*>", " ", html))
    return re.sub(r"[ \t\r\f\v]+", " ", text).strip()
