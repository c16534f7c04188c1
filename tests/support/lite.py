"""What the lite engine's tests share: page inputs made from a PDF page or an image file, one page through
lite (in this process) as Markdown, the checks of the sample document's pages (tests/support/sample.py),
word F1, and lines of body text for the small PDFs the tests draw."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image
from rapidfuzz import fuzz

from ocrserve import Document, Page, Source, load_profile, parse_output, render_markdown
from ocrserve.engines.base import PageInput
from ocrserve.engines.lite.engine import lite_raw_for
from tests.support import sample as make_sample

PROFILE = load_profile("chandra-1")
T = make_sample.SAMPLE_TEXT
W, H = 612, 792  # US Letter, the size of tests.support.helpers.letter_canvas

BODY = [
    "Sediment moves through the delta in pulses that follow the seasonal floods of the river.",
    "Engineers measure the depth of each channel and the speed of the water at fixed stations.",
    "The survey team repeated the soundings every spring and compared them with older maps.",
    "Most of the silt settles near the mouth where the current slows down and spreads out.",
]


def paragraph(c, lines: list[str], x: float = 72, y: float = 700, size: float = 11, lead: float = 15) -> float:
    """Draw `lines` in Helvetica on the reportlab canvas `c` from (x, y) down; the y below the last line."""
    c.setFont("Helvetica", size)
    for ln in lines:
        c.drawString(x, y, ln)
        y -= lead
    return y


# ---------------------------------------------------------------- page inputs


def pdf_page_input(path: Path, index: int, profile=PROFILE, scale: float | None = None) -> PageInput:
    """A PDF page as the engines get it, rendered at the profile's resolution (or at `scale`)."""
    doc = pdfium.PdfDocument(str(path))
    page = doc[index]
    w, h = page.get_size()
    scale = scale or max(profile.pdf_dpi / 72, profile.min_short_side / min(w, h))
    img = page.render(scale=scale).to_pil().convert("RGB")
    doc.close()
    return PageInput(
        doc_id=path.stem, index=index, image=img, width=w, height=h, unit="pt", source_path=str(path), source_type="pdf"
    )


def image_page_input(path: Path) -> PageInput:
    img = Image.open(path).convert("RGB")
    return PageInput(
        doc_id=path.stem,
        index=0,
        image=img,
        width=img.width,
        height=img.height,
        unit="px",
        source_path=str(path),
        source_type=path.suffix.lstrip(".").lower(),
    )


# ---------------------------------------------------------------- one page as Markdown


def page_markdown(page: PageInput, profile=PROFILE) -> tuple[str, Page]:
    """One page through lite in this process: its Markdown, and the page parsed."""
    raw = lite_raw_for(page, profile)
    parsed = parse_output(raw, profile, (page.width, page.height), index=page.index, unit=page.unit)
    doc = Document(source=Source(path=page.source_path or "x", type=page.source_type, page_count=1), pages=[parsed])
    return render_markdown(doc), parsed


def text_layer_markdown(path: Path, index: int = 0) -> tuple[str, Page]:
    """A Letter page of a born-digital PDF read from its text layer (no rendered image): Markdown and page."""
    image = Image.new("RGB", (8, 8), "white")
    return page_markdown(
        PageInput(doc_id=path.stem, index=index, image=image, width=W, height=H, source_path=str(path))
    )


def pdf_markdown(path: Path, index: int = 0) -> str:
    """One page of a PDF, rendered at 72 dpi, through lite as Markdown."""
    return page_markdown(pdf_page_input(path, index, scale=1))[0]


# ---------------------------------------------------------------- checks


def _pos(md: str, text: str) -> int:
    """Where `text` best matches in `md` (fuzzy), asserting the match is good."""
    al = fuzz.partial_ratio_alignment(text, md)
    assert al is not None and al.score >= 90, f"{text!r} not found in Markdown (score {al and al.score})"
    return al.dest_start


def _heading(md: str, text: str, exact: bool) -> None:
    heads = [ln.lstrip("#").strip() for ln in md.splitlines() if re.match(r"#{1,6} ", ln)]
    if exact:
        assert text in heads, f"{text!r} is not a heading: {heads}"
    else:
        assert any(fuzz.ratio(text, h) >= 90 for h in heads), f"{text!r} is not a heading: {heads}"


def check_page1(md: str, exact: bool) -> None:
    """The sample's page 1: its text, headings, reading order, and no page furniture."""
    for t in [T["intro"], *T["left"], *T["right"]]:
        if exact:
            assert t in md
        _pos(md, t)
    _heading(md, T["title"], exact)
    _heading(md, T["h_methods"], exact)
    assert re.search(r"^# ", md, re.M), "the title is a level-1 heading"
    # reading order: title, intro, left column (both paragraphs), then right column
    order = [T["title"], T["intro"], *T["left"], *T["right"]]
    positions = [_pos(md, t) for t in order]
    assert positions == sorted(positions), f"reading order wrong: {positions}"
    # the running header and the page number are page furniture, not body text
    assert T["header"] not in md and "Page 1" not in md


def check_page2(md: str, exact: bool) -> None:
    """The sample's page 2: its headings, the table's cells, the list, reading order."""
    _heading(md, T["h_results"], exact)
    _heading(md, T["h_next"], exact)
    for row in T["table"]:
        cells = [c.strip() for c in md.splitlines() if c.startswith("|") for c in c.strip("|").split("|")]
        for cell in row:
            assert any(fuzz.ratio(cell, c) >= 90 for c in cells), f"table cell {cell!r} missing: {cells}"
    for item in T["list"]:
        _pos(md, item)
    positions = [_pos(md, t) for t in (T["h_results"], T["h_next"], T["list"][0], T["outro_left"], T["outro_right"])]
    assert positions == sorted(positions), f"reading order wrong: {positions}"


def _words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", unicodedata.normalize("NFKC", text)))


def word_f1(got: str, want: str) -> float:
    """F1 of the words (NFKC, counted) of `got` against those of `want`."""
    g, w = _words(got), _words(want)
    tp = sum((g & w).values())
    if not tp:
        return 0.0
    p, r = tp / sum(g.values()), tp / sum(w.values())
    return 2 * p * r / (p + r)
