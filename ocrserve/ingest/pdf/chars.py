"""Characters of a PDF page's text layer (pypdfium2) and the line fragments they make.

Coordinates are page coordinates as the page is displayed (rotation applied, crop box origin at the
top left, y down, PDF points). Each character also carries its writing direction in that space
(`angle`, degrees, 0 = upright left to right, 90 = top to bottom), from its text matrix. Then:

- `main_rotation` / `turn`: a page whose text mostly runs in another direction (content drawn sideways, or a
  `/Rotate` that turns it) is turned so that its main direction reads upright;
- spacing accents set over a letter join it (ocrserve.ingest.pdf.accents);
- `chars_to_lines`: characters -> line fragments; ligatures (several characters on one glyph box)
  stay in their word; characters off the main direction (margin watermarks, spine text, slanted
  column heads) make their own lines along their direction, marked by `Line.angle`.

pypdfium2 is not thread-safe: call this from one thread per process (the lite engine's workers).
"""

from __future__ import annotations

import ctypes
import math
import re
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ocrserve.ingest.pdf.bidi import is_rtl, line_text, ltr_reach, presentation_to_base
from ocrserve.ingest.pdf.fonts import font_traits

INVISIBLE_MODES = {3, 7}  # FPDF_TEXTRENDERMODE_INVISIBLE, _CLIP


@dataclass
class Char:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float  # font size in points (pdfium), 0 when unknown
    weight: int  # font weight (400 normal, 700 bold), -1 when unknown
    invisible: bool
    generated: bool  # a space or line break pdfium inferred
    angle: float = 0.0  # writing direction in displayed page space, degrees (0 upright, 90 downwards)
    mono: bool = False  # a monospaced font (ocrserve.ingest.pdf.fonts)


@dataclass
class Line:
    """A line (or line fragment) of text with its box, shared by the text layer and OCR."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float = 0.0  # font size when known (text layer), else 0
    bold: bool = False
    score: float = 1.0  # OCR confidence; 1 for the text layer
    angle: float = 0.0  # writing direction (degrees) of rotated text; 0 for upright lines
    mono: bool = False  # set in a monospaced font (code), text layer only

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

    def direction(self, a: float, b: float) -> float:
        """The displayed angle (degrees in [0, 360), y down) of a user-space direction (a, b)."""
        x0, y0 = self.point(self.left, self.top)
        x1, y1 = self.point(self.left + a, self.top + b)
        return math.degrees(math.atan2(y1 - y0, x1 - x0)) % 360.0

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
    get_matrix = getattr(pdfium_c, "FPDFText_GetMatrix", None)
    matrix = pdfium_c.FS_MATRIX() if get_matrix is not None else None
    mode_cache: dict[int, bool] = {}
    font_cache: dict[tuple[bytes, int], tuple[bool, bool]] = {}
    chars: list[Char] = []
    for i in range(max(n, 0)):
        code = pdfium_c.FPDFText_GetUnicode(raw_tp, i)
        try:
            ch = chr(code)
        except (ValueError, OverflowError):
            ch = "\ufffd"
        ch = presentation_to_base(ch)  # joined Arabic letter shapes, Hebrew ligatures: their letters
        if code == 2:
            ch = "-"  # pdfium's mark for a hyphen that ends a line ("replace-" / "ment")
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
        bold_name, mono = font_traits(raw_tp, i, font_cache)
        if weight < 600 and bold_name:
            weight = 700
        angle = 0.0
        if get_matrix is not None and matrix is not None and get_matrix(raw_tp, i, matrix) and (matrix.a or matrix.b):
            angle = frame.direction(matrix.a, matrix.b)
        chars.append(Char(ch, x0, y0, x1, y1, size, weight, invisible, generated, angle, mono))
    if textpage is None:
        tp.close()
    return chars, frame


# ---------------------------------------------------------------- direction and accents


def _off_axis(angle: float, tol: float = 10.0) -> bool:
    """True when a direction is not (about) upright."""
    d = angle % 360.0
    return min(d, 360.0 - d) > tol


def main_rotation(chars: list[Char]) -> int:
    """The page's main writing direction rounded to 0/90/180/270 (by character count): the turn
    that makes most of its text upright. 0 unless most characters agree on another direction."""
    votes = {0: 0, 90: 0, 180: 0, 270: 0}
    for c in chars:
        if c.generated or c.text.isspace():
            continue
        q = int(round(c.angle / 90.0)) % 4 * 90
        if abs(((c.angle - q) + 180) % 360 - 180) <= 10:
            votes[q] += 1
    total = sum(votes.values())
    best = max(votes, key=lambda k: votes[k])
    return best if best and total and votes[best] > 0.5 * total else 0


def turn_box(
    box: tuple[float, float, float, float], width: float, height: float, rotation: int
) -> tuple[float, float, float, float]:
    """A box of page space (width x height) in the page turned by `rotation` (see `turn`)."""

    def pt(x: float, y: float) -> tuple[float, float]:
        if rotation == 90:  # text runs downwards: turn the page counter-clockwise
            return y, width - x
        if rotation == 270:  # text runs upwards: turn clockwise
            return height - y, x
        if rotation == 180:
            return width - x, height - y
        return x, y

    xa, ya = pt(box[0], box[1])
    xb, yb = pt(box[2], box[3])
    return min(xa, xb), min(ya, yb), max(xa, xb), max(ya, yb)


def turn(chars: list[Char], width: float, height: float, rotation: int) -> tuple[list[Char], float, float]:
    """Turn page space by `rotation` (the main writing direction) so that it reads upright."""
    if rotation not in (90, 180, 270):
        return chars, width, height
    out = []
    for c in chars:
        if c.generated and c.x1 <= c.x0:
            out.append(c)
            continue
        x0, y0, x1, y1 = turn_box((c.x0, c.y0, c.x1, c.y1), width, height, rotation)
        out.append(
            Char(c.text, x0, y0, x1, y1, c.size, c.weight, c.invisible, c.generated, (c.angle - rotation) % 360.0)
        )
    w, h = (height, width) if rotation in (90, 270) else (width, height)
    return out, w, h


def _rotated_lines(chars: list[Char]) -> list[Line]:
    """Characters off the upright direction -> lines along their own direction (content order)."""
    lines: list[Line] = []
    cur: list[Char] = []

    def close() -> None:
        boxed = [c for c in cur if not c.text.isspace()]
        text = re.sub(r"\s+", " ", "".join(c.text for c in cur)).strip()
        if text and boxed:
            ang = boxed[len(boxed) // 2].angle
            sizes = sorted(c.size for c in boxed)
            lines.append(
                Line(
                    text,
                    min(c.x0 for c in boxed),
                    min(c.y0 for c in boxed),
                    max(c.x1 for c in boxed),
                    max(c.y1 for c in boxed),
                    sizes[len(sizes) // 2],
                    False,
                    1.0,
                    ang or 360.0,
                )
            )
        cur.clear()

    for c in chars:
        if c.text in "\r\n":
            close()
            continue
        if c.text.isspace():
            if cur:
                cur.append(c)
            continue
        if cur:
            last = next(x for x in reversed(cur) if not x.text.isspace())
            step = max(last.x1 - last.x0, last.y1 - last.y0, c.size, 1.0)
            dist = math.hypot((c.x0 + c.x1 - last.x0 - last.x1) / 2, (c.y0 + c.y1 - last.y0 - last.y1) / 2)
            if abs(((c.angle - last.angle) + 180) % 360 - 180) > 5 or dist > 1.8 * step:
                close()
        cur.append(c)
    close()
    return lines


# ---------------------------------------------------------------- lines


def _rtl_script(t: str) -> bool:
    """Hebrew or Arabic script: letters, and digits (Arabic-Indic numbers step leftwards with the text)."""
    return is_rtl(t) or "\u0590" <= t[:1] <= "\u08ff"


def _touching(a: Char, b: Char, tol: float) -> bool:
    """Two glyphs, one of right-to-left script, whose boxes meet: a space pdfium puts between them
    ("۲ . ۲", letters cut apart) is no gap on the page."""
    return (_rtl_script(a.text) or _rtl_script(b.text)) and min(abs(b.x0 - a.x1), abs(a.x0 - b.x1)) <= tol


def chars_to_lines(chars: list[Char]) -> list[Line]:
    """Characters in content order -> line fragments (a break at line ends and at wide gaps);
    characters off the upright direction come back as their own lines (`Line.angle` set)."""
    rotated = [c for c in chars if c.text not in "\r\n" and (c.x1 > c.x0 or c.text.isspace()) and _off_axis(c.angle)]
    if rotated:
        keep = {id(c) for c in rotated}
        chars = [c for c in chars if id(c) not in keep]
    lines: list[Line] = []
    cur: list[Char] = []
    pending_space = False

    def close() -> None:
        nonlocal cur
        if cur:
            text = re.sub(r"\s+", " ", line_text(cur) if rtl else "".join(c.text for c in cur)).strip()
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
                lines.append(
                    Line(
                        text=text,
                        x0=min(c.x0 for c in boxed),
                        y0=min(c.y0 for c in boxed),
                        x1=max(c.x1 for c in boxed),
                        y1=max(c.y1 for c in boxed),
                        size=size,
                        bold=heavy >= 0.8 * len(boxed),
                        mono=sum(1 for c in boxed if c.mono) >= 0.8 * len(boxed),
                    )
                )
        cur = []

    x1 = y0 = y1 = xl = 0.0
    rtl = False  # the line holds right-to-left characters: they step leftwards (logical order)
    prev_box: tuple[float, float] | None = None
    reach = ltr_reach(chars)
    for i, c in enumerate(chars):
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
            if (
                not same
                and overlap >= 0.5 * min(lh, h)
                and prev_box is not None
                and abs(c.x0 - prev_box[0]) < 0.5
                and c.x1 >= prev_box[1] - 0.5
            ):
                same, gap = True, 0.0  # a ligature: pdfium gives its characters the glyph's box
            if not same and (rtl or _rtl_script(c.text)) and overlap >= 0.5 * min(lh, h):
                # right to left: the next character sits left of the line, or back inside it (a number)
                right = reach[i] if reach else c.x1
                gap = max(xl - right, c.x0 - x1)
                same = right >= xl - 0.9 * max(lh, h) and c.x0 <= x1 + 0.9 * max(lh, h)
            if not same:
                close()
            elif (pending_space and not _touching(cur[-1], c, 0.1 * min(lh, h))) or gap > 0.25 * min(lh, h):
                cur.append(Char(" ", x1, y0, x1, y1, 0.0, -1, c.invisible, True))
        if not cur:
            x1, y0, y1, xl, rtl = c.x1, c.y0, c.y1, c.x0, False
        cur.append(c)
        rtl = rtl or _rtl_script(c.text)
        xl = min(xl, c.x0)
        prev_box = (c.x0, c.x1)
        pending_space = False
        x1 = max(x1, c.x1)
        # the line's band follows the first characters (superscripts do not widen it much)
        if len(cur) <= 2:
            y0, y1 = min(y0, c.y0), max(y1, c.y1)
    close()
    return lines + (_rotated_lines(rotated) if rotated else [])


def rows_of(lines: list[Line], overlap: float) -> list[list[Line]]:
    """Lines grouped into rows, top to bottom: a line joins the row above when their vertical extents
    overlap by at least `overlap` of the smaller height (first line of the row as the reference)."""
    rows: list[list[Line]] = []
    for ln in sorted(lines, key=lambda l: l.cy):
        if rows and min(rows[-1][0].y1, ln.y1) - max(rows[-1][0].y0, ln.y0) >= overlap * min(rows[-1][0].h, ln.h):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    return rows
