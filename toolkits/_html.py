"""HTML to readable text, parsed by lexbor (``selectolax``): linear time on any input.

The standard library's ``html.parser`` gives up on some malformed markup (``<![``), and any
hand-written fallback is one regex away from quadratic time; lexbor is a maintained HTML5
parser in C that parses what browsers parse, in linear time. The tree is then walked
iteratively (no recursion limit on deep nesting).

Scripts, styles and other non-content elements are dropped; block elements become line
breaks; headings, list items and table cells keep a light Markdown-like shape; links keep
their (absolute) target as ``text (url)`` so the model can follow them.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

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


class _TextBuilder:
    """Collects the visible text while the tree is walked."""

    def __init__(self, base_url: str, *, in_title: bool = False) -> None:
        self.base_url = base_url
        self.in_title = in_title
        self.parts: list[str] = []
        self.title: str | None = None
        self._pre_depth = 0

    def start(self, node: LexborNode) -> bool:
        """Handle an opening tag; False means "skip this element and its content"."""
        tag = node.tag or ""
        if tag == "title":
            if self.title is None and not self.in_title:
                self.title = _title_text(node.text(deep=True) or "")
            return False
        if tag in _SKIP:
            return False
        if tag == "base" and (href := node.attributes.get("href")):
            self.base_url = urljoin(self.base_url, href)
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
        elif tag == "img" and (alt := node.attributes.get("alt")):
            self.parts.append(f"[image: {alt}]")
        return True

    def end(self, node: LexborNode) -> None:
        """Handle the end of an element that was entered."""
        tag = node.tag or ""
        if tag == "a":
            href = node.attributes.get("href")
            if href and not href.startswith(("javascript:", "#", "data:")):
                self.parts.append(f" ({urljoin(self.base_url, href)})")
        elif tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def text(self, data: str) -> None:
        """Handle a text node."""
        if self._pre_depth:
            self.parts.append(data.replace("\n", "\x00"))  # protected from whitespace collapse
        else:
            self.parts.append(re.sub(r"\s+", " ", data))


def _children(node: LexborNode) -> list[LexborNode]:
    out = []
    child = node.child
    while child is not None:
        out.append(child)
        child = child.next
    return out


def _walk(root: LexborNode, builder: _TextBuilder) -> None:
    # Explicit stack: (node, leaving). Each node is pushed at most twice: linear time.
    stack: list[tuple[LexborNode, bool]] = [(c, False) for c in reversed(_children(root))]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            builder.end(node)
            continue
        tag = node.tag
        if tag == "-text":
            builder.text(node.text_content or "")
        elif tag and not tag.startswith(("-", "!")) and builder.start(node):
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(_children(node)))


def _title_text(raw: str) -> str:
    """A title's text is not parsed as markup; what looks like tags in it is dropped."""
    if "<" not in raw:
        return raw
    builder = _TextBuilder("", in_title=True)
    tree = LexborHTMLParser(raw)
    if tree.root is not None:
        _walk(tree.root, builder)
    return "".join(builder.parts)


def html_to_text(html: str, base_url: str = "") -> str:
    """Convert an HTML document to readable plain text.

    Args:
        html: The document.
        base_url: URL the document came from, to make relative links absolute.

    Returns:
        The text; the page title (if any) first, as a ``# Title`` line.
    """
    # Lone surrogates cannot be handed to the C parser: they cannot be encoded as UTF-8.
    html = html.encode("utf-8", errors="replace").decode("utf-8")
    tree = LexborHTMLParser(html)
    builder = _TextBuilder(base_url)
    if tree.root is not None:
        _walk(tree.root, builder)
    text = "".join(builder.parts)
    lines = [line.strip(" ") for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip().replace("\x00", "\n")
    title = " ".join((builder.title or "").split())
    return f"# {title}\n\n{text}" if title else text
