"""A PDF page's text layer through pypdfium2: characters, line fragments, and whether it can be trusted.

Coordinates are page coordinates as the page is displayed (rotation applied, crop box origin at the
top left, y down, PDF points). The "usable text layer" decision looks at:

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

import ctypes
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

log = logging.getLogger(__name__)

INVISIBLE_MODES = {3, 7}  # FPDF_TEXTRENDERMODE_INVISIBLE, _CLIP


@dataclass
class Char:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float          # font size in points (pdfium), 0 when unknown
    weight: int          # font weight (400 normal, 700 bold), -1 when unknown
    invisible: bool
    generated: bool      # a space or line break pdfium inferred


@dataclass
class Line:
    """A line (or line fragment) of text with its box, shared by the text layer and OCR."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float = 0.0    # font size when known (text layer), else 0
    bold: bool = False
    score: float = 1.0   # OCR confidence; 1 for the text layer

    @property
    def h(self) -> float:
        return max(self.y1 - self.y0, 1e-6)

    @property
    def w(self) -> float:
        return max(self.x1 - self.x0, 0.0)

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass
class Quality:
    chars: int = 0           # non-space characters
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
    invisible_share: float = 0.0


# ---------------------------------------------------------------- coordinates


class _Frame:
    """PDF user space -> displayed page space (top-left origin, rotation applied)."""

    def __init__(self, page: pdfium.PdfPage):
        left, bottom, right, top = page.get_cropbox()
        self.left, self.top = left, top
        self.w0, self.h0 = right - left, top - bottom
        self.rot = page.get_rotation() % 360
        self.width, self.height = (self.h0, self.w0) if self.rot in (90, 270) else (self.w0, self.h0)

    def point(self, x: float, y: float) -> tuple[float, float]:
        xp, yp = x - self.left, self.top - y
        if self.rot == 90:
            return self.h0 - yp, xp
        if self.rot == 180:
            return self.w0 - xp, self.h0 - yp
        if self.rot == 270:
            return yp, self.w0 - xp
        return xp, yp

    def box(self, l: float, b: float, r: float, t: float) -> tuple[float, float, float, float]:
        xa, ya = self.point(l, b)
        xb, yb = self.point(r, t)
        return min(xa, xb), min(ya, yb), max(xa, xb), max(ya, yb)


# ---------------------------------------------------------------- characters


def extract_chars(page: pdfium.PdfPage, textpage: pdfium.PdfTextPage | None = None) -> tuple[list[Char], _Frame]:
    """All characters of a page in content order, boxes in displayed page space."""
    frame = _Frame(page)
    tp = textpage or page.get_textpage()
    raw_tp = tp.raw
    n = pdfium_c.FPDFText_CountChars(raw_tp)
    l, r, b, t = (ctypes.c_double() for _ in range(4))
    get_mode = getattr(pdfium_c, "FPDFTextObj_GetTextRenderMode", None)
    get_obj = getattr(pdfium_c, "FPDFText_GetTextObject", None)
    has_map_error = getattr(pdfium_c, "FPDFText_HasUnicodeMapError", None)
    mode_cache: dict[int, bool] = {}
    font_cache: dict[bytes, bool] = {}
    chars: list[Char] = []
    for i in range(max(n, 0)):
        code = pdfium_c.FPDFText_GetUnicode(raw_tp, i)
        try:
            ch = chr(code)
        except (ValueError, OverflowError):
            ch = "\ufffd"
        generated = bool(pdfium_c.FPDFText_IsGenerated(raw_tp, i))
        if has_map_error is not None and has_map_error(raw_tp, i) == 1:
            ch = "\ufffd"
        if ch in "\r\n" or (ch.isspace() and generated):
            chars.append(Char(ch, 0, 0, 0, 0, 0.0, -1, False, True))
            continue
        if pdfium_c.FPDFText_GetLooseCharBox is not None:
            rect = pdfium_c.FS_RECTF()
            ok = pdfium_c.FPDFText_GetLooseCharBox(raw_tp, i, rect)
            box = (rect.left, rect.bottom, rect.right, rect.top) if ok else None
        else:  # pragma: no cover - very old pdfium
            box = None
        if box is None or box[2] - box[0] <= 0:
            if pdfium_c.FPDFText_GetCharBox(raw_tp, i, l, r, b, t):
                box = (l.value, b.value, r.value, t.value)
            else:
                box = (0.0, 0.0, 0.0, 0.0)
        x0, y0, x1, y1 = frame.box(*box)
        invisible = False
        if get_mode is not None and get_obj is not None:
            obj = get_obj(raw_tp, i)
            key = ctypes.cast(obj, ctypes.c_void_p).value or 0
            if key not in mode_cache:
                mode_cache[key] = bool(obj) and get_mode(obj) in INVISIBLE_MODES
            invisible = mode_cache[key]
        size = float(pdfium_c.FPDFText_GetFontSize(raw_tp, i))
        weight = int(pdfium_c.FPDFText_GetFontWeight(raw_tp, i))
        if weight < 600 and _font_is_bold(raw_tp, i, font_cache):
            weight = 700
        chars.append(Char(ch, x0, y0, x1, y1, size, weight, invisible, generated))
    if textpage is None:
        tp.close()
    return chars, frame


_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)


def _font_is_bold(raw_tp, i: int, cache: dict[bytes, bool]) -> bool:
    """Bold by font name (base-14 fonts report weight 400 even when they are Helvetica-Bold)."""
    buf = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    n = pdfium_c.FPDFText_GetFontInfo(raw_tp, i, buf, 128, flags)
    if n <= 0:
        return False
    name = buf.raw[: max(n - 1, 0)]
    if name not in cache:
        cache[name] = bool(_BOLD_NAME.search(name.decode("latin-1", "replace")))
    return cache[name]


# ---------------------------------------------------------------- quality

_TOKEN = re.compile(r"[^\W\d_]+", re.UNICODE)
_VOWELS = set("aeiouyAEIOUYàáâäæãåāèéêëēėęîïíīįìôöòóœøōõûüùúūÿÀÁÂÄÆÃÅĀÈÉÊËĒĖĘÎÏÍĪĮÌÔÖÒÓŒØŌÕÛÜÙÚŪŸ")


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


# ---------------------------------------------------------------- lines


def chars_to_lines(chars: list[Char]) -> list[Line]:
    """Characters in content order -> line fragments (a break at line ends and at wide gaps)."""
    lines: list[Line] = []
    cur: list[Char] = []
    pending_space = False

    def close() -> None:
        nonlocal cur
        if cur:
            text = "".join(c.text for c in cur)
            text = re.sub(r"\s+", " ", text).strip()
            boxed = [c for c in cur if not c.text.isspace()]
            if text and boxed:
                sizes = sorted(c.size for c in boxed)
                hs = sorted(c.y1 - c.y0 for c in boxed)
                size, h = sizes[len(sizes) // 2], hs[len(hs) // 2]
                if not (size > 0 and 0.5 <= h / size <= 2.5):
                    # pdfium reports the Tf size; with the size in the text matrix (Tf 1) it is
                    # useless: take the glyph box height instead
                    size = h / 1.2
                heavy = sum(1 for c in boxed if c.weight >= 600)
                lines.append(Line(
                    text=text,
                    x0=min(c.x0 for c in boxed), y0=min(c.y0 for c in boxed),
                    x1=max(c.x1 for c in boxed), y1=max(c.y1 for c in boxed),
                    size=size, bold=heavy >= 0.8 * len(boxed),
                ))
        cur = []

    x1 = y0 = y1 = 0.0
    for c in chars:
        if c.text in "\r\n":
            close()
            pending_space = False
            continue
        if c.text.isspace():
            pending_space = True
            continue
        if c.x1 <= c.x0 and c.y1 <= c.y0:
            continue  # no box: nothing to place
        h = max(c.y1 - c.y0, 1e-3)
        if cur:
            lh = max(y1 - y0, 1e-3)
            overlap = min(y1, c.y1) - max(y0, c.y0)
            gap = c.x0 - x1
            same = overlap >= 0.5 * min(lh, h) and -0.5 * max(lh, h) <= gap <= 0.9 * max(lh, h)
            if not same:
                close()
            elif pending_space or gap > 0.25 * min(lh, h):
                cur.append(Char(" ", x1, y0, x1, y1, 0.0, -1, c.invisible, True))
        if not cur:
            x1, y0, y1 = c.x1, c.y0, c.y1
        cur.append(c)
        pending_space = False
        x1 = max(x1, c.x1)
        # the line's band follows the first characters (superscripts do not widen it much)
        if len(cur) <= 2:
            y0, y1 = min(y0, c.y0), max(y1, c.y1)
    close()
    return lines


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
    report = TextLayerReport(width=frame.width, height=frame.height)
    page_area = max(frame.width * frame.height, 1.0)
    solid = [c for c in chars if not c.text.isspace()]
    inside = [c for c in solid if c.x1 > 0 and c.y1 > 0 and c.x0 < frame.width and c.y0 < frame.height]
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
            report.reason = (f"invisible text layer of poor quality (valid {q.valid_ratio:.2f}, "
                             f"word-shaped {q.word_ratio:.2f})") if trust_invisible else "invisible text layer"
            return report
    elif not q.good():
        report.verdict = "ocr_page"
        report.reason = f"garbled text layer (valid {q.valid_ratio:.2f}, word-shaped {q.word_ratio:.2f})"
        return report

    W, H = frame.width, frame.height
    lines = chars_to_lines([c for c in chars if c.text.isspace() or (c.x1 > 0 and c.y1 > 0 and c.x0 < W and c.y0 < H)])
    report.lines = lines

    # images with (almost) no text over them: OCR those regions (or the page when they cover it)
    uncovered = []
    for rect in _image_rects(page, frame):
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
