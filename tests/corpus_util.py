"""Helpers shared by the parser/renderer tests: the raw-output corpus and token comparison."""

from __future__ import annotations

import html
import re
from pathlib import Path

from ocrserve import Document, Page, parse_output
from ocrserve.document import Source

CORPUS = Path(__file__).parent / "corpus"
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
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1) if haystack[i] == first)
