"""Chunks for retrieval: a Document -> `<name>.chunks.jsonl`, one chunk (ocrserve.render.chunk_model.Chunk) a line.

Modelled on docling's chunkers: hierarchical (one item per layout element, the heading path as
metadata, captions with their figure or table) and hybrid (items split to a token limit, small
neighbours under the same headings merged back up to it). Here:

- Blocks go in reading order across pages; page headers and footers are left out (as in the
  Markdown) unless asked for. Each chunk's text is the blocks' Markdown joined by blank lines.
- A Section-Header opens a section: its heading path (the headings above it by level) is the
  `headings` of every chunk in it, and its own line starts the section's first chunk. A heading
  with nothing under it before a subsection joins the subsection's first chunk when that fits.
- A caption goes with the table or figure next to it on the same page (the one after it, else the
  one before it).
- Units never cut: a table (with its captions), a formula, a figure, a list item, a code block. A
  list is split between items; a paragraph over the limit is split between sentences (then words).
  A unit larger than the limit alone is a chunk of its own, over the limit; every other chunk
  fits it.
- Consecutive units under the same headings are packed into one chunk while the chunk fits.

Token counts: the default needs no tokenizer: ceil(characters / 4), a wide (CJK) character counting
as one token by itself (English BPE vocabularies average about four characters a token; a CJK
character is about one). Pass `tokenizer=` a callable (str -> token count) or the name or folder of
a Hugging Face tokenizer (loaded with transformers' AutoTokenizer, when transformers is installed)
to count real tokens.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from ocrserve.document import Block, Document, Page
from ocrserve.labels import FIGURE_LABELS, HEADER_FOOTER
from ocrserve.render.chunk_model import Chunk, ChunkBlock

DEFAULT_MAX_TOKENS = 512
ATOMIC_LABELS = {"Table", "Equation-Block", "Code-Block", "Form", "Chemical-Block", "Table-Of-Contents"} | FIGURE_LABELS
CAPTION_TARGETS = {"Table"} | FIGURE_LABELS

TokenCounter = Callable[[str], int]

_SENTENCE = re.compile(r"(?<=[.!?;:\u3002\uff01\uff1f])\s+")
_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.S)


def estimate_tokens(text: str) -> int:
    """Tokenizer-free count: ceil(other characters / 4) + one per wide (CJK) character."""
    wide = sum(1 for ch in text if unicodedata.east_asian_width(ch) in "WF")
    return math.ceil((len(text) - wide) / 4) + wide


def token_counter(tokenizer: TokenCounter | str | None = None) -> TokenCounter:
    """The token counter for `tokenizer`: None (estimate_tokens), a callable, or a Hugging Face
    tokenizer name or folder (needs transformers; loaded as it is, from the local cache or a folder
    or the Hub, whatever transformers is configured to do)."""
    if tokenizer is None:
        return estimate_tokens
    if callable(tokenizer):
        return tokenizer
    if isinstance(tokenizer, str):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ValueError(
                f"tokenizer {tokenizer!r}: a Hugging Face tokenizer needs transformers "
                "(pip install '.[hf]' in a clone of ocrserve), or pass a callable"
            ) from None
        try:
            tok = AutoTokenizer.from_pretrained(tokenizer)
        except Exception as e:  # noqa: BLE001 - whatever the hub or the folder raised
            raise ValueError(f"tokenizer {tokenizer!r}: cannot be loaded ({e})") from None
        return lambda text: len(tok.encode(text, add_special_tokens=False))
    raise ValueError(f"tokenizer {tokenizer!r}: use None, a callable (str -> int) or a tokenizer name")


# ---------------------------------------------------------------- units


@dataclass
class _Unit:
    """A piece of a chunk: Markdown parts and the blocks they come from."""

    parts: list[str]
    refs: list[ChunkBlock]
    headings: tuple[str, ...]
    heading: bool = False  # a Section-Header's own line
    glue: str = "\n\n"  # what goes before it after a piece of the same block ("\n" list items, " " sentences)

    @property
    def text(self) -> str:
        return "\n\n".join(p for p in self.parts if p)


def _ref(page: Page, b: Block) -> ChunkBlock:
    return ChunkBlock(page=page.index + 1, index=b.index, label=b.label, bbox=list(b.bbox), bbox_norm=list(b.bbox_norm))


def _heading_of(b: Block) -> tuple[int, str]:
    md = (b.markdown or "").strip()
    m = _HEADING.match(md)
    if m:
        return len(m.group(1)), m.group(2).strip()
    return 2, md or (b.text or "").strip()


def _groups(doc: Document, keep_headers_footers: bool) -> list[list[tuple[Page, Block]]]:
    """Blocks in reading order, a caption grouped with its table or figure."""
    flat = [
        (p, b)
        for p in doc.pages
        for b in p.blocks
        if (b.markdown or "").strip() and (keep_headers_footers or b.label not in HEADER_FOOTER)
    ]
    groups: list[list[tuple[Page, Block]]] = []
    i = 0
    while i < len(flat):
        p, b = flat[i]
        if b.label == "Caption":
            j = i
            while j < len(flat) and flat[j][1].label == "Caption" and flat[j][0] is p:
                j += 1  # captions in a row go together
            captions = flat[i:j]
            if j < len(flat) and flat[j][0] is p and flat[j][1].label in CAPTION_TARGETS:
                groups.append(captions + [flat[j]])
                i = j + 1
                continue
            prev = groups[-1] if groups else None
            if prev and prev[-1][0] is p and any(x.label in CAPTION_TARGETS for _, x in prev):
                prev.extend(captions)
            else:
                groups.extend([c] for c in captions)
            i = j
            continue
        groups.append([(p, b)])
        i += 1
    return groups


def _list_items(md: str) -> list[str]:
    items: list[str] = []
    for line in md.split("\n"):
        if _ITEM.match(line) or not items:
            items.append(line)
        else:
            items[-1] += "\n" + line
    return [it.strip("\n") for it in items if it.strip()]


def _split_text(text: str, limit: int, count: TokenCounter) -> list[str]:
    """A paragraph over the limit -> pieces within it, cut between sentences, else between words."""
    pieces: list[str] = []
    for sentence in _SENTENCE.split(text):
        if count(sentence) > limit:
            words, cur = sentence.split(" "), ""
            for w in words:
                cand = f"{cur} {w}" if cur else w
                if cur and count(cand) > limit:
                    pieces.append(cur)
                    cand = w
                cur = cand
            sentence = cur
        if pieces and count(f"{pieces[-1]} {sentence}") <= limit:
            pieces[-1] = f"{pieces[-1]} {sentence}"
        else:
            pieces.append(sentence)
    return [p for p in pieces if p.strip()]


def _units(doc: Document, limit: int, count: TokenCounter, keep_headers_footers: bool) -> list[_Unit]:
    units: list[_Unit] = []
    path: list[tuple[int, str]] = []
    for group in _groups(doc, keep_headers_footers):
        page, block = group[-1]
        if len(group) == 1 and block.label == "Section-Header":
            level, text = _heading_of(block)
            path = [h for h in path if h[0] < level] + [(level, text)]
            units.append(_Unit([block.markdown.strip()], [_ref(page, block)], tuple(t for _, t in path), heading=True))
            continue
        headings = tuple(t for _, t in path)
        refs = [_ref(p, b) for p, b in group]
        md = [b.markdown.strip() for _, b in group]
        whole = _Unit(md, refs, headings)
        if len(group) > 1 or block.label in ATOMIC_LABELS or count(whole.text) <= limit:
            units.append(whole)
        elif block.label == "List-Group":
            units += [_Unit([it], refs, headings, glue="\n") for it in _list_items(md[0])]
        else:
            units += [_Unit([piece], refs, headings, glue=" ") for piece in _split_text(md[0], limit, count)]
    return units


# ---------------------------------------------------------------- packing


@dataclass
class _Draft:
    units: list[_Unit] = field(default_factory=list)

    @property
    def headings(self) -> tuple[str, ...]:
        return self.units[-1].headings

    @property
    def text(self) -> str:
        return self.joined(None)

    def joined(self, extra: _Unit | None) -> str:
        units = self.units + ([extra] if extra is not None else [])
        out = ""
        for prev, u in zip([None, *units], units):
            sep = "" if prev is None else u.glue if prev.refs == u.refs else "\n\n"
            out += sep + u.text
        return out

    @property
    def only_headings(self) -> bool:
        return all(u.heading for u in self.units)


def _pack(units: list[_Unit], limit: int, count: TokenCounter) -> list[_Draft]:
    drafts: list[_Draft] = []
    cur = _Draft()
    for u in units:
        if cur.units:
            same = u.headings == cur.headings and not u.heading
            # a lone heading joins the first chunk of its subsection
            sub = cur.only_headings and u.headings[: len(cur.headings)] == cur.headings
            if (same or sub) and count(cur.joined(u)) <= limit:
                cur.units.append(u)
                continue
            drafts.append(cur)
            cur = _Draft()
        cur.units.append(u)
    if cur.units:
        drafts.append(cur)
    return drafts


def chunk_document(
    doc: Document,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    tokenizer: TokenCounter | str | None = None,
    keep_headers_footers: bool = False,
) -> list[Chunk]:
    """The Document's chunks, in reading order."""
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r}: a positive number of tokens")
    count = token_counter(tokenizer)
    base = (
        (doc.source.sha256 or "")[:12] or re.sub(r"[^A-Za-z0-9_.-]+", "_", doc.source.path.rsplit("/", 1)[-1]) or "doc"
    )
    chunks = []
    for n, d in enumerate(_pack(_units(doc, max_tokens, count, keep_headers_footers), max_tokens, count)):
        refs: list[ChunkBlock] = []
        for u in d.units:
            refs += [r for r in u.refs if not refs or r != refs[-1]]  # a split block is listed once
        labels = list(dict.fromkeys(r.label for r in refs))
        text = d.text
        chunks.append(
            Chunk(
                id=f"{base}-{n:04d}",
                index=n,
                text=text,
                headings=list(d.headings),
                pages=sorted({r.page for r in refs}),
                blocks=refs,
                labels=labels,
                tokens=count(text),
                source=doc.source.path,
            )
        )
    return chunks


def render_chunks_jsonl(doc: Document, **options) -> str:
    """The chunks as JSON lines (`<name>.chunks.jsonl`); options as chunk_document."""
    return "".join(json.dumps(c.model_dump(), ensure_ascii=False) + "\n" for c in chunk_document(doc, **options))


def embedding_text(chunk: Chunk) -> str:
    """The text to embed: the heading path, then the chunk (docling's `contextualize`)."""
    heads = " > ".join(chunk.headings)
    return f"{heads}\n\n{chunk.text}" if heads else chunk.text
