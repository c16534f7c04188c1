"""Page images, sized straight to the model's pixel budget on its patch grid.

These functions run in worker processes (pypdfium2 is not thread-safe). A PDF page is rendered at
the scale that lands it on the grid (never big-then-shrink): the width exactly, the height within a
patch, padded or cropped by a few pixels. Images get their EXIF orientation applied, JPEGs are
decoded at a reduced scale when they are much larger than needed, and anything above the
decompression-bomb limit is refused before decoding.
"""

from __future__ import annotations

import atexit
import hashlib
import math
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps


from ocrserve.ingest.sniff import describe_unknown, sniff_file
from ocrserve.png import encode_pixels, encode_png


class DocumentError(Exception):
    """A document that cannot be read at all; the message says why. `sha256`: the file's hash when it
    was read before the error (an encrypted PDF without its password), so a finished output of this
    very file can still be recognised."""

    def __init__(self, message: str, sha256: str | None = None) -> None:
        super().__init__(message)
        self.sha256 = sha256

    def __reduce__(self):  # keep sha256 across processes
        return (type(self), (str(self), self.sha256))


@dataclass(frozen=True)
class Budget:
    """The profile's page-image budget, small enough to send to workers."""

    pdf_dpi: float = 192.0
    min_short_side: int = 1024
    min_image_side: int = 1536
    max_pixels: int = 3072 * 2048
    patch_multiple: int = 32

    @classmethod
    def from_profile(cls, p) -> "Budget":
        return cls(p.pdf_dpi, p.min_short_side, p.min_image_side, p.max_pixels, p.patch_multiple)


@dataclass
class SourceInfo:
    type: str
    page_count: int
    sha256: str


@dataclass
class RenderedPage:
    index: int
    png: bytes
    image_width: int
    image_height: int
    width: float     # original page size (points or pixels)
    height: float
    unit: str
    render_s: float


def _grid(v: float, m: int) -> int:
    return max(m, int(round(v / m)) * m)


def target_size(w: float, h: float, scale: float, budget: Budget) -> tuple[int, int]:
    """Image size for a page of w x h at `scale`, capped at max_pixels and snapped to the patch grid."""
    if w * scale * h * scale > budget.max_pixels:
        scale = math.sqrt(budget.max_pixels / (w * h))
    m = budget.patch_multiple
    W, H = _grid(w * scale, m), _grid(h * scale, m)
    while W * H > budget.max_pixels and (W > m or H > m):
        if W >= H:
            W -= m
        else:
            H -= m
    return W, H


def pdf_target(w: float, h: float, budget: Budget) -> tuple[int, int]:
    scale = max(budget.pdf_dpi / 72.0, budget.min_short_side / max(1e-6, min(w, h)))
    return target_size(w, h, scale, budget)


def image_target(w: int, h: int, budget: Budget) -> tuple[int, int]:
    scale = budget.min_image_side / max(w, h) if max(w, h) < budget.min_image_side else 1.0
    return target_size(w, h, scale, budget)


# --- worker-side state: open PDFs are kept for the pages that follow -----------------------------
_OPEN: "OrderedDict[tuple[str, str | None], object]" = OrderedDict()
_MAX_OPEN = 4
_KEPT_OPEN: list[dict] = []  # caches of open PDFs (values) closed at exit


def close_at_exit(cache: dict) -> None:
    """Close the PDFs left in `cache` at exit, before pypdfium2's own exit hook, which reports each one
    "still open" on stderr: call it after importing pypdfium2 (atexit runs the later-registered first)."""
    if not _KEPT_OPEN:
        atexit.register(_close_kept)
    if all(c is not cache for c in _KEPT_OPEN):
        _KEPT_OPEN.append(cache)


def _close_kept() -> None:
    for cache in _KEPT_OPEN:
        while cache:
            try:
                cache.popitem()[1].close()
            except Exception:  # noqa: BLE001
                pass


def _pdf(path: str, password: str | None):
    import pypdfium2 as pdfium

    close_at_exit(_OPEN)
    for k in [k for k in _OPEN if k[0] != path and not os.path.exists(k[0])]:
        forget(k[0])  # a deleted upload must not stay open (its disk space held) in this worker
    key = (path, password)
    doc = _OPEN.get(key)
    if doc is not None:
        _OPEN.move_to_end(key)
        return doc
    try:
        doc = pdfium.PdfDocument(path, password=password)
    except pdfium.PdfiumError as e:
        msg = str(e)
        if "password" in msg.lower():
            raise DocumentError(
                "encrypted PDF: wrong password" if password else "encrypted PDF: a password is needed (--password)"
            ) from None
        raise DocumentError(f"corrupt or unreadable PDF ({msg})") from None
    try:
        doc.init_forms()  # render form fields (flattened into the page image)
    except Exception:  # noqa: BLE001 - forms are optional
        pass
    _OPEN[key] = doc
    while len(_OPEN) > _MAX_OPEN:
        _, old = _OPEN.popitem(last=False)
        try:
            old.close()
        except Exception:  # noqa: BLE001
            pass
    return doc


def forget(path: str) -> None:
    """Close a PDF this worker holds open (the document is finished)."""
    for key in [k for k in _OPEN if k[0] == path]:
        try:
            _OPEN.pop(key).close()
        except Exception:  # noqa: BLE001
            pass


def _open_image(path: str, max_pixels: int) -> Image.Image:
    Image.MAX_IMAGE_PIXELS = None  # our own, clearer guard below
    try:
        img = Image.open(path)
    except Exception as e:  # noqa: BLE001
        raise DocumentError(f"unreadable image ({e})") from None
    w, h = img.size
    if w * h > max_pixels:
        img.close()
        raise DocumentError(
            f"image too large: {w}x{h} = {w * h / 1e6:.0f} MP exceeds the {max_pixels / 1e6:.0f} MP "
            "decompression-bomb limit (OCRSERVE_MAX_IMAGE_PIXELS)"
        )
    return img


def open_source(path: str, password: str | None, max_image_pixels: int) -> SourceInfo:
    """Type, page count and sha256 of a file; DocumentError when it cannot be a document."""
    p = Path(path)
    if not p.exists():
        raise DocumentError("no such file")
    if not p.is_file():
        raise DocumentError("not a regular file")
    h = hashlib.sha256()
    try:
        kind = sniff_file(p)
        if kind is None:
            raise DocumentError(describe_unknown(p))
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as e:  # unreadable (permissions, I/O error): the reason in words
        raise DocumentError(f"cannot read file: {e.strerror or e}") from None
    if kind == "pdf":
        try:
            doc = _pdf(path, password)
        except DocumentError as e:
            raise DocumentError(str(e), sha256=h.hexdigest()) from None
        n = len(doc)
        if n == 0:
            raise DocumentError("PDF has no pages")
    else:
        img = _open_image(path, max_image_pixels)
        n = getattr(img, "n_frames", 1) if kind == "tiff" else 1
        try:
            img.verify() if kind != "tiff" else None
        except Exception as e:  # noqa: BLE001
            raise DocumentError(f"corrupt image ({e})") from None
        finally:
            img.close()
    return SourceInfo(type=kind, page_count=n, sha256=h.hexdigest())


def pdf_page_pixels(path: str, index: int, budget: Budget, password: str | None = None) -> tuple[np.ndarray, float, float]:
    """The page rendered straight to its target size, as (H, W, 3) RGB pixels, and its size in points."""
    doc = _pdf(path, password)
    try:
        page = doc[index]
    except Exception as e:  # noqa: BLE001
        raise DocumentError(f"page {index + 1} cannot be loaded ({e})") from None
    try:
        w, h = page.get_size()
        if w <= 0 or h <= 0:
            raise DocumentError(f"page {index + 1} has no size")
        W, H = pdf_target(w, h, budget)
        # pypdfium2's default bitmap: a packed buffer Python allocates, kept alive by the array below (pdfium's
        # own buffer renders no faster: bench/results/png-render-micro/)
        bitmap = page.render(scale=W / w, may_draw_forms=True, draw_annots=True, rev_byteorder=True)
        a = bitmap.to_numpy()
        if a.ndim != 3 or a.shape[2] != 3:  # pdfium chose another format (a gray or alpha bitmap)
            a = np.asarray(bitmap.to_pil().convert("RGB"))
        if a.shape[:2] != (H, W):  # within a patch of the grid: pad (white) or crop, no resampling
            out = np.full((H, W, 3), 255, dtype=np.uint8)
            hh, ww = min(H, a.shape[0]), min(W, a.shape[1])
            out[:hh, :ww] = a[:hh, :ww]
            a = out
    finally:
        page.close()
    return a, float(w), float(h)


def pdf_page_image(path: str, index: int, budget: Budget, password: str | None = None) -> tuple[Image.Image, float, float]:
    """pdf_page_pixels as a Pillow RGB image."""
    a, w, h = pdf_page_pixels(path, index, budget, password)
    return Image.fromarray(a, "RGB"), w, h


def render_pdf_page(path: str, index: int, budget: Budget, password: str | None = None) -> RenderedPage:
    t0 = time.perf_counter()
    a, w, h = pdf_page_pixels(path, index, budget, password)
    png = encode_pixels(a)
    return RenderedPage(index, png, a.shape[1], a.shape[0], w, h, "pt", time.perf_counter() - t0)


def render_image_page(path: str, index: int, budget: Budget, max_image_pixels: int) -> RenderedPage:
    t0 = time.perf_counter()
    img = _open_image(path, max_image_pixels)
    try:
        if index:
            img.seek(index)
        orientation = img.getexif().get(0x0112, 1) if hasattr(img, "getexif") else 1
        w, h = img.size
        if orientation in (5, 6, 7, 8):
            w, h = h, w
        W, H = image_target(w, h, budget)
        if img.format == "JPEG" and W < w / 2:
            # decode at a reduced scale: no full-size decode to throw away
            img.draft("RGB", (H, W) if orientation in (5, 6, 7, 8) else (W, H))
        img = ImageOps.exif_transpose(img)
        if img.mode != "RGB":
            img = img.convert("RGBA").convert("RGB") if img.mode in ("P", "LA", "PA") else img.convert("RGB")
        if img.size != (W, H):
            img = img.resize((W, H), Image.Resampling.BICUBIC)
        img.load()
    except DocumentError:
        raise
    except Exception as e:  # noqa: BLE001 - truncated or corrupt image data
        raise DocumentError(f"corrupt image ({e})") from None
    png = encode_png(img)
    return RenderedPage(index, png, W, H, float(w), float(h), "px", time.perf_counter() - t0)


def render_page(path: str, kind: str, index: int, budget: Budget, password: str | None, max_image_pixels: int) -> RenderedPage:
    if kind == "pdf":
        return render_pdf_page(path, index, budget, password)
    return render_image_page(path, index, budget, max_image_pixels)
