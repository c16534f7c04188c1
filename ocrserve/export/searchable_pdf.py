"""Searchable PDF: the source's pages untouched, with an invisible text layer where the text is.

- PDF sources: the original file's pages are kept as they are (their content streams are not
  rewritten; the text goes into a content stream of its own), in a new PDF without the source's
  active content: JavaScript, actions, embedded files, forms (export/inert.py says what goes). A page whose own text layer is usable
  (the lite engine's rule: ocrserve.ingest.pdf.textlayer.analyze_page, including an earlier
  invisible OCR layer that reads like text) keeps it and gets no second layer; a page whose text
  layer misses image regions gets text only for the blocks inside those regions.
- Images (PNG, JPEG, TIFF frames, ...): one PDF page per image (or frame) holding the image (a
  JPEG without an EXIF rotation goes in as it is, not re-encoded), sized from the image's DPI
  (`image_dpi` when it has none), with the text layer on top.

The text is in render mode 3 (invisible) in a glyphless CID font (ocrserve.export.glyphless), so
every script works and nothing is drawn. Each block's lines are laid out inside its box
(text_layout.py: the line count and height fitted to the box, each line stretched to its width), so
selecting and searching in a viewer find the words in the region where they are. Figures get no
text (their description is not on the page); a table's cells go row by row.

Written with pypdfium2 (Apache-2.0 / BSD-3-Clause; PDFium itself is BSD), already a core
dependency; pdfium is not thread-safe, so the work runs under the same process-wide lock as the
lite engine's in-process calls.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import logging
import math
import re
import time
from pathlib import Path

from ocrserve.document import Document
from ocrserve.errors import OcrserveError
from ocrserve.export.glyphless import ASCENT, cid_to_gid_map, font_bytes, to_unicode_cmap
from ocrserve.export.inert import inert_copy
from ocrserve.export.text_layout import PlacedLine, page_layout
from ocrserve.ingest.office import OFFICE_TYPES, pdf_for
from ocrserve.ingest.pdf.chars import _Frame as PageFrame
from ocrserve.ingest.pdf.document import DocumentError

log = logging.getLogger(__name__)

DEFAULT_IMAGE_DPI = 150.0
_MAX_CIDS = 65534


class SearchablePdfError(OcrserveError, ValueError):
    """The searchable PDF cannot be built (the message names the source and the reason)."""


# ---------------------------------------------------------------- writing (pdfium)


class _Frame(PageFrame):
    """The page's frame (lite's: PDF user space -> displayed page space), and its way back."""

    def to_user(self, X: float, Y: float) -> tuple[float, float]:
        if self.rot == 90:
            xp, yp = Y, self.h0 - X
        elif self.rot == 180:
            xp, yp = self.w0 - X, self.h0 - Y
        elif self.rot == 270:
            xp, yp = self.w0 - Y, X
        else:
            xp, yp = X, Y
        return xp + self.left, self.top - yp

    def text_matrix(self, bx: float, by: float, hscale: float) -> tuple[float, ...]:
        """Text space (x right, y up, font units already scaled) at baseline (bx, by) -> user space."""
        e, f = self.to_user(bx, by)
        ax, ay = self.to_user(bx + hscale, by)
        cx, cy = self.to_user(bx, by - 1.0)
        return ax - e, ay - f, cx - e, cy - f, e, f


class _LayerFont:
    """The glyphless font loaded into one PDF, with a CID for each character used."""

    def __init__(self, pdf, chars: set[str]) -> None:
        import pypdfium2.raw as pdfium_c

        ordered = sorted(chars)[:_MAX_CIDS]
        self.cid = {c: i + 1 for i, c in enumerate(ordered)}
        data = font_bytes()
        self._keep = [
            (ctypes.c_ubyte * len(data)).from_buffer_copy(data),
            ctypes.create_string_buffer(to_unicode_cmap(ordered)),
        ]
        gids = cid_to_gid_map(len(ordered))
        self._keep.append((ctypes.c_ubyte * len(gids)).from_buffer_copy(gids))
        self.handle = pdfium_c.FPDFText_LoadCidType2Font(
            pdf.raw, self._keep[0], len(data), self._keep[1], self._keep[2], len(gids)
        )
        if not self.handle:
            raise SearchablePdfError("pdfium could not load the text-layer font")

    def codes(self, text: str) -> list[int]:
        return [self.cid[c] for c in text if c in self.cid]


def _add_lines(pdf, page, font: _LayerFont, frame: _Frame, lines: list[PlacedLine]) -> int:
    import pypdfium2.raw as pdfium_c

    added = 0
    for ln in lines:
        codes = font.codes(ln.text)
        if not codes or ln.height <= 0.01:
            continue
        size = ln.height  # the em spans the line band: ascent above the baseline, descent below
        obj = pdfium_c.FPDFPageObj_CreateTextObj(pdf.raw, font.handle, ctypes.c_float(size))
        if not obj:
            raise SearchablePdfError("pdfium could not create a text object")
        arr = (ctypes.c_uint * len(codes))(*codes)
        pdfium_c.FPDFText_SetCharcodes(obj, arr, len(codes))
        pdfium_c.FPDFTextObj_SetTextRenderMode(obj, pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE)
        hscale = ln.width / (len(codes) * size)  # every advance is one em
        pdfium_c.FPDFPageObj_Transform(obj, *frame.text_matrix(ln.x0, ln.top + ASCENT * size, hscale))
        pdfium_c.FPDFPage_InsertObject(page.raw, obj)
        added += 1
    if added and not pdfium_c.FPDFPage_GenerateContent(page.raw):
        raise SearchablePdfError("pdfium could not write the page's text layer")
    return added


def _write_layers(pdf, plans) -> bytes:
    """Each planned page gets its lines in one invisible font (the characters of the whole document)."""
    font = _LayerFont(pdf, {c for _, _, lines in plans for ln in lines for c in ln.text})
    for page, frame, lines in plans:
        _add_lines(pdf, page, font, frame, lines)
        page.close()
    return _save(pdf)


def _save(pdf) -> bytes:
    buf = io.BytesIO()
    pdf.save(buf)
    return buf.getvalue()


def _pdf_source(doc: Document, path: Path, password: str | None) -> bytes:
    import pypdfium2 as pdfium

    from ocrserve.ingest.pdf.textlayer import analyze_page

    try:
        source = pdfium.PdfDocument(str(path), password=password)
    except pdfium.PdfiumError as e:
        raise SearchablePdfError(f"{path}: cannot open the source PDF ({e})") from None
    try:
        pdf = inert_copy(source)  # the source's pages without its JavaScript, actions and attachments
    finally:
        source.close()
    try:
        plans = []
        for p in doc.pages:
            if not p.blocks or p.status == "failed":
                continue
            if not 0 <= p.index < len(pdf):
                log.warning(
                    "%s: the document has page %d, the PDF only %d pages; page skipped", path, p.index + 1, len(pdf)
                )
                continue
            page = pdf[p.index]
            report = analyze_page(page)
            if report.verdict == "text":
                log.debug("%s page %d keeps its own text layer (%s)", path, p.index + 1, report.reason)
                page.close()
                continue
            frame = _Frame(page)
            regions = report.ocr_regions if report.verdict == "ocr_regions" else None
            plans.append((page, frame, page_layout(p.blocks, frame.width, frame.height, regions)))
        if not any(lines for _, _, lines in plans):
            for page, _, _ in plans:
                page.close()
            return _save(pdf)  # nothing to add: the source's pages as they are
        return _write_layers(pdf, plans)
    finally:
        pdf.close()


def _image_frames(path: Path, kind: str):
    from PIL import Image, ImageOps

    try:
        img = Image.open(path)
    except Exception as e:  # noqa: BLE001
        raise SearchablePdfError(f"{path}: cannot open the source image ({e})") from None
    with img:
        for i in range(getattr(img, "n_frames", 1) if kind == "tiff" else 1):  # as ingest counts pages
            img.seek(i)
            orientation = img.getexif().get(0x0112, 1)
            dpi = img.info.get("dpi")
            frame = ImageOps.exif_transpose(img)
            if frame.mode not in ("RGB", "L"):
                frame = (
                    frame.convert("RGBA").convert("RGB")
                    if "A" in frame.mode or frame.mode == "P"
                    else frame.convert("RGB")
                )
            plain_jpeg = img.format == "JPEG" and orientation == 1 and img.mode in ("RGB", "L")
            yield i, frame.copy(), dpi, plain_jpeg


def _image_source(doc: Document, path: Path, image_dpi: float) -> bytes:
    import pypdfium2 as pdfium

    pages = {p.index: p for p in doc.pages}
    pdf = pdfium.PdfDocument.new()
    try:
        plans = []
        for i, img, dpi, plain_jpeg in _image_frames(path, doc.source.type):
            try:
                dx, dy = (float(dpi[0]), float(dpi[1])) if dpi else (image_dpi, image_dpi)
            except (TypeError, ValueError, IndexError):
                dx, dy = image_dpi, image_dpi
            dx = dx if math.isfinite(dx) and dx >= 10 else image_dpi
            dy = dy if math.isfinite(dy) and dy >= 10 else image_dpi
            w, h = img.width * 72.0 / dx, img.height * 72.0 / dy
            page = pdf.new_page(w, h)
            pim = pdfium.PdfImage.new(pdf)
            if plain_jpeg:
                pim.load_jpeg(str(path), pages=[page])  # the JPEG's own bytes, not re-encoded
            else:
                pim.set_bitmap(pdfium.PdfBitmap.from_pil(img), pages=[page])
            pim.set_matrix(pdfium.PdfMatrix().scale(w, h))
            page.insert_obj(pim)
            page.gen_content()
            p = pages.get(i)
            lines = page_layout(p.blocks, w, h) if p is not None and p.status != "failed" else []
            plans.append((page, _Frame(page), lines))
        if not plans:
            raise SearchablePdfError(f"{path}: the image has no frames")
        return _write_layers(pdf, plans)
    finally:
        pdf.close()


_CREATED = re.compile(rb"/CreationDate\(D:\d{14}[^)]*\)")
_FILE_ID = re.compile(rb"/ID\[<[0-9A-Fa-f]{32}><[0-9A-Fa-f]{32}>\]")


def _reproducible(data: bytes, doc: Document, path: Path) -> bytes:
    """The same Document and source give the same bytes: pdfium stamps the time of saving and a random
    file /ID; they become the source file's modification time and a hash of what the PDF holds (same
    lengths, so the cross-reference offsets stay right)."""
    digest = hashlib.sha256(doc.model_dump_json(exclude={"pages": {"__all__": {"timings"}}}).encode()).hexdigest()
    file_id = digest[:32].upper().encode()
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(path.stat().st_mtime)).encode()

    def created(m: re.Match) -> bytes:
        new = b"/CreationDate(D:" + stamp + b"+00'00')"
        return new if len(new) == len(m.group(0)) else m.group(0)

    data = _CREATED.sub(created, data, count=1)
    return _FILE_ID.sub(b"/ID[<" + file_id + b"><" + file_id + b">]", data, count=1)


def searchable_pdf(
    doc: Document,
    source: str | Path | None = None,
    *,
    password: str | None = None,
    image_dpi: float = DEFAULT_IMAGE_DPI,
) -> bytes:
    """The searchable PDF of `doc` built from its source (default: doc.source.path), as bytes."""
    path = Path(source if source is not None else doc.source.path)
    if not path.is_file():
        raise SearchablePdfError(f"{path}: no such file (the searchable PDF is built from the source document)")
    from ocrserve.ingest.pdf.document import PDFIUM_LOCK

    if doc.source.type in OFFICE_TYPES:  # an Office file: the pages of its PDF, made by LibreOffice
        try:
            path, password = Path(pdf_for(path, doc.source.type)), None
        except DocumentError as e:
            raise SearchablePdfError(f"{path.name}: {e}") from None
    with PDFIUM_LOCK:
        if doc.source.type == "pdf" or doc.source.type in OFFICE_TYPES:
            data = _pdf_source(doc, path, password)
        else:
            data = _image_source(doc, path, image_dpi)
    if data is not None and data[:5] == b"%PDF-" and data != path.read_bytes():
        data = _reproducible(data, doc, path)
    return data
