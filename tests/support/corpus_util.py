"""Helpers shared by the parser/renderer tests: the raw-output corpus and token comparison."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

from ocrserve import Document, Page, parse_output
from ocrserve.document import Source

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
PAGE_SIZE = (612.0, 792.0)


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.html"))


def profile_for(path: Path) -> str:
    return "chandra-2" if path.name.startswith("c2_") else "chandra-1"


def parse_corpus(name: str, page_size: tuple[float, float] = PAGE_SIZE) -> Page:
    path = CORPUS / name
    return parse_output(path.read_text(encoding="utf-8"), profile_for(path), page_size)


def doc_of(*pages: Page, path: str = "sample.pdf") -> Document:
    for i, p in enumerate(pages):
        p.index = i
    return Document(source=Source(path=path, type="pdf", page_count=len(pages)), model="chandra-1", pages=list(pages))


_INLINE_TAGS = re.compile(r"</?(?:b|i|u|em|strong|del|s|sup|sub|small|big|span|code)\b[^>]*>", re.I)
_BLOCK_TAGS = re.compile(r"</?(?:table|thead|tbody|tfoot|tr|td|th|caption|br|p|div)\b[^>]*>", re.I)
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_LIST_NUMBER = re.compile(r"^[ \t]*\d+\.[ \t]", re.M)  # ordered-list markers are not text
_TOKEN = re.compile(r"[^\W_]+")


def text_tokens(text: str) -> list[str]:
    """Alphanumeric tokens of plain text; emphasis and link marks and backslashes do not split words."""
    return _TOKEN.findall(re.sub(r"[*~`\\\[\]]", "", text))


def markdown_tokens(md: str) -> list[str]:
    """Alphanumeric tokens of Markdown text: HTML table markup, link targets and escapes ignored."""
    md = _LINK_TARGET.sub("]", md)
    md = _LIST_NUMBER.sub("", md)
    md = _INLINE_TAGS.sub("", md)
    md = _BLOCK_TAGS.sub(" ", md)
    md = html.unescape(md)
    return text_tokens(md)


def contains_run(haystack: list[str], needle: list[str]) -> bool:
    if not needle:
        return True
    first, n = needle[0], len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1) if haystack[i] == first)


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    handle_startendtag = handle_starttag


_PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "section", "figure", "figcaption"}
_SQUEEZE = re.compile(r"[\x00-\x20\x7f\u00a0\u200b-\u200f\ufeff]+")


def unsafe_html_findings(out: str, allowed_tags: set[str]) -> list[str]:
    """What would let the HTML run code: script tags, on* handlers, javascript:/vbscript:/data: URLs."""
    found = []
    if re.search(r"<\s*script", out, re.I):
        found.append("<script")
    if re.search(r"<[^>]*[\s/\"']on[a-z]+\s*=", out, re.I):
        found.append("on...= in a tag")
    p = _TagCollector()
    p.feed(out)
    p.close()
    for tag, attrs in p.tags:
        if tag not in allowed_tags | _PAGE_TAGS:
            found.append(f"tag {tag}")
        for name, value in attrs:
            v = _SQUEEZE.sub("", html.unescape(value or "")).lower()
            if name.startswith("on"):
                found.append(f"{tag} {name}=")
            if "javascript:" in v or "vbscript:" in v or (name in ("href", "src") and v.startswith("data:")):
                found.append(f"{tag} {name}={value!r}")
            if name == "style" and ("expression" in v or "url(" in v):
                found.append(f"{tag} style={value!r}")
    return found
