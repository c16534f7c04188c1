"""A PDF page's text layer through pypdfium2: its lines (ocrserve.ingest.pdf.chars) and whether it
can be trusted.

Coordinates are page coordinates as the page is displayed (rotation applied, crop box origin at the
top left, y down, PDF points), turned further when the page's text mostly runs sideways
(`TextLayerReport.rotation`: render the page with that turn for OCR). The "usable text layer"
decision looks at:

- how much text there is at all (a scan without OCR has none);
- render mode: text drawn invisibly (mode 3/7) is an earlier OCR pass over a scan; it is used only
  when it reads like real text, else the page is OCR'd again;
- quality: the share of valid printable characters (no U+FFFD, private-use or control characters,
  no pdfium unicode-map errors) and the share of word-shaped tokens (broken font encodings give
  strings like `Xhqk3%@` that are printable but not words);
- coverage: image objects of the page with (almost) no text over them are regions to OCR (a
  born-digital cover sheet stamped on a scanned article, a screenshot with text in it).

pypdfium2 is not thread-safe: call this from one thread per process (the lite engine's workers).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ocrserve.ingest.pdf.accents import compose_accents
from ocrserve.ingest.pdf.bidi import is_rtl
from ocrserve.ingest.pdf.chars import Char, Line, _Frame, chars_to_lines, extract_chars, main_rotation, turn, turn_box  # noqa: F401 - Line and Char are this module's API too
from ocrserve.ingest.pdf.harakat import rebuild_vocalised_rows

log = logging.getLogger(__name__)


@dataclass
class Quality:
    chars: int = 0  # non-space characters
    valid_ratio: float = 1.0
    word_ratio: float = 1.0  # word-shaped alphabetic tokens / alphabetic tokens
    words: int = 0

    def good(self, strict: bool = False) -> bool:
        if self.chars == 0:
            return False
        if strict:
            return self.valid_ratio >= 0.98 and (self.words < 5 or self.word_ratio >= 0.85)
        return self.valid_ratio >= 0.9 and (self.words < 8 or self.word_ratio >= 0.6)


@dataclass
class TextLayerReport:
    """What the text layer of one page holds and what to do with it."""

    width: float
    height: float
    lines: list[Line] = field(default_factory=list)
    verdict: Literal["text", "ocr_page", "ocr_regions"] = "text"
    reason: str = ""
    ocr_regions: list[tuple[float, float, float, float]] = field(default_factory=list)
    quality: Quality = field(default_factory=Quality)
    rotation: int = 0  # clockwise turn (degrees) that made the page's text upright
    invisible_share: float = 0.0


# ---------------------------------------------------------------- quality

_TOKEN = re.compile(r"[^\W\d_]+", re.UNICODE)
_VOWELS = set("aeiouyAEIOUYàáâäæãåāèéêëēėęîïíīįìôöòóœøōõûüùúūÿÀÁÂÄÆÃÅĀÈÉÊËĒĖĘÎÏÍĪĮÌÔÖÒÓŒØŌÕÛÜÙÚŪŸ")


def _rtl_script(text: str) -> bool:
    """Most letters are Arabic or Hebrew (scripts RapidOCR's models do not read)."""
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 50 and sum(1 for c in letters if is_rtl(c)) >= 0.5 * len(letters)


def _is_valid_char(ch: str) -> bool:
    if ch == "\ufffd":
        return False
    cat = unicodedata.category(ch)
    if cat in ("Co", "Cn", "Cs"):
        return False
    if cat == "Cc" and ch not in "\t\r\n":
        return False
    return True


def _word_shaped(tok: str) -> bool:
    """A rough test that an alphabetic token looks like a word (Latin letters; other scripts pass)."""
    if len(tok) < 2:
        return True
    if not all("a" <= c.lower() <= "z" or c in _VOWELS for c in tok):
        # non-Latin script: judged by the valid-character ratio only
        return True
    if tok.isupper() and len(tok) <= 6:
        return True  # acronyms
    inner = tok[1:]
    if any(c.isupper() for c in inner) and not tok.isupper():
        return False  # xYz mixed case inside a word
    if len(tok) >= 4 and not any(c in _VOWELS for c in tok):
        return False
    run = 0
    for c in tok.lower():
        run = 0 if c in _VOWELS else run + 1
        if run >= 5:
            return False
    return True


def text_quality(text: str) -> Quality:
    """How much a string looks like real text."""
    nonspace = [c for c in text if not c.isspace()]
    if not nonspace:
        return Quality(chars=0, valid_ratio=0.0, word_ratio=0.0)
    valid = sum(1 for c in nonspace if _is_valid_char(c))
    toks = [t for t in _TOKEN.findall(text) if len(t) >= 2]
    shaped = sum(1 for t in toks if _word_shaped(t))
    return Quality(
        chars=len(nonspace),
        valid_ratio=valid / len(nonspace),
        word_ratio=(shaped / len(toks)) if toks else 1.0,
        words=len(toks),
    )


# ---------------------------------------------------------------- images


def _image_rects(page: pdfium.PdfPage, frame: _Frame) -> list[tuple[float, float, float, float]]:
    rects = []
    try:
        objs = page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_FORM], max_depth=1)
        for obj in objs:
            if obj.type == pdfium_c.FPDF_PAGEOBJ_FORM and not _form_has_image(obj.raw):
                continue
            l, b, r, t = obj.get_bounds() if hasattr(obj, "get_bounds") else obj.get_pos()
            x0, y0, x1, y1 = frame.box(l, b, r, t)
            x0, y0 = max(x0, 0.0), max(y0, 0.0)
            x1, y1 = min(x1, frame.width), min(y1, frame.height)
            if x1 > x0 and y1 > y0:
                rects.append((x0, y0, x1, y1))
    except Exception as exc:  # noqa: BLE001 - a page whose objects cannot be listed still has text
        log.debug("could not list image objects: %s", exc)
    return rects


def _form_has_image(form, depth: int = 0) -> bool:
    """A form XObject (images are often wrapped in one) that draws an image somewhere inside."""
    if depth > 4:
        return False
    for i in range(pdfium_c.FPDFFormObj_CountObjects(form)):
        child = pdfium_c.FPDFFormObj_GetObject(form, i)
        kind = pdfium_c.FPDFPageObj_GetType(child)
        if kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
            return True
        if kind == pdfium_c.FPDF_PAGEOBJ_FORM and _form_has_image(child, depth + 1):
            return True
    return False


def _area(r: tuple[float, float, float, float]) -> float:
    return max(r[2] - r[0], 0.0) * max(r[3] - r[1], 0.0)


# ---------------------------------------------------------------- the decision


def analyze_page(page: pdfium.PdfPage, *, trust_invisible: bool = True) -> TextLayerReport:
    """Read a page's text layer and decide: use it, OCR the whole page, or OCR some regions."""
    chars, frame = extract_chars(page)
    rotation = main_rotation(chars)
    chars, W, H = turn(chars, frame.width, frame.height, rotation)
    report = TextLayerReport(width=W, height=H, rotation=rotation)
    page_area = max(W * H, 1.0)
    solid = [c for c in chars if not c.text.isspace()]
    inside = [c for c in solid if c.x1 > 0 and c.y1 > 0 and c.x0 < W and c.y0 < H]
    invisible = [c for c in inside if c.invisible]
    report.invisible_share = len(invisible) / len(inside) if inside else 0.0
    text = "".join(c.text for c in chars)
    q = text_quality(text)
    report.quality = q

    if len(inside) < 5:
        report.verdict, report.reason = "ocr_page", "no text layer"
        return report
    if len(inside) < 0.5 * len(solid):
        report.verdict, report.reason = "ocr_page", "text layer lies mostly outside the page"
        return report
    if report.invisible_share >= 0.5:
        if trust_invisible and q.good(strict=True):
            report.reason = "invisible text layer (earlier OCR) that reads like text"
        else:
            report.verdict = "ocr_page"
            report.reason = (
                (f"invisible text layer of poor quality (valid {q.valid_ratio:.2f}, word-shaped {q.word_ratio:.2f})")
                if trust_invisible
                else "invisible text layer"
            )
            return report
    elif not q.good() and not _rtl_script(text):
        report.verdict = "ocr_page"
        report.reason = f"garbled text layer (valid {q.valid_ratio:.2f}, word-shaped {q.word_ratio:.2f})"
        return report
    elif not q.good():  # OCR does not read Arabic or Hebrew: the layer's readable characters are better
        chars = [c for c in chars if c.text != "\ufffd"]
        report.reason = f"right-to-left text layer with unmapped glyphs (valid {q.valid_ratio:.2f}), kept"

    chars = compose_accents([c for c in chars if c.text.isspace() or (c.x1 > 0 and c.y1 > 0 and c.x0 < W and c.y0 < H)])
    lines = chars_to_lines(rebuild_vocalised_rows(chars))
    report.lines = lines

    # images with (almost) no text over them: OCR those regions (or the page when they cover it)
    uncovered = []
    for rect in (turn_box(r, frame.width, frame.height, rotation) for r in _image_rects(page, frame)):
        if _area(rect) < 0.04 * page_area:
            continue
        x0, y0, x1, y1 = rect
        over = sum(1 for c in inside if x0 <= (c.x0 + c.x1) / 2 <= x1 and y0 <= (c.y0 + c.y1) / 2 <= y1)
        if over < 10:  # a handful of characters = no text layer there
            uncovered.append(rect)
    if uncovered:
        total = sum(_area(r) for r in uncovered)
        if total >= 0.5 * page_area:
            report.verdict = "ocr_page"
            report.reason = f"images without text cover {total / page_area:.0%} of the page"
            report.lines = []
            return report
        report.verdict = "ocr_regions"
        report.reason = f"{len(uncovered)} image region(s) without text"
        report.ocr_regions = uncovered
    elif not report.reason:
        report.reason = "usable text layer"
    return report
