"""Page images, as Chandra's own client makes them (sizes: imagesize.py).

These functions run in worker processes (pypdfium2 is not thread-safe). A PDF page is flattened (form
fields and annotations into its content, as upstream does) and rendered whole at upstream's scale, then
resized to the client's fit with LANCZOS when that changes its size; an image is upscaled when small
(LANCZOS) and fitted the same way. Nothing is cropped or padded: the image is the whole page, so boxes
map to true page coordinates. The server's processor then snaps the image to its patch grid, as it
does for upstream's requests.

A gray page (every pixel R = G = B: most text pages, gray scans) is resized and written on its one
channel: Pillow resamples each channel of an RGB image exactly as it does an L image, so the pixels are
upstream's, for a third of the work (tests/ingest/test_gray_fit.py); decoded to RGB, the gray PNG is
the same image.

Resizing is Pillow's LANCZOS, pixel for pixel, from a native resampler three to eight times as fast on a
page (resize.py; Pillow itself where it is not built or disagrees with the installed Pillow).

Deliberate differences from upstream, each tested (tests/ingest/test_fidelity.py): an image's EXIF
orientation is applied (upstream sends a phone photo sideways), every TIFF frame is a page (upstream
reads the first), and anything above the decompression-bomb limit is refused before decoding.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from ocrserve.imagesize import MAX_ASPECT, Budget, client_fit_size, image_upscale_size, pdf_scale
from ocrserve.ingest import office, resize
from ocrserve.ingest.pdf.document import DocumentError, open_pdf
from ocrserve.ingest.pdf.document import forget as forget  # re-exported: callers close a finished document here
from ocrserve.ingest.sniff import describe_unknown, sniff_file
from ocrserve.png import encode_pixels, encode_png, gray_channel


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
    width: float  # original page size (points or pixels)
    height: float
    unit: str
    render_s: float


def pdf_target(w: float, h: float, budget: Budget) -> tuple[int, int]:
    """The size of the image sent for a w x h pt page: pypdfium2's render size at upstream's scale, fitted."""
    scale = pdf_scale(w, h, budget)
    return client_fit_size(math.ceil(w * scale), math.ceil(h * scale), budget)


def image_target(w: int, h: int, budget: Budget) -> tuple[int, int]:
    """The size of the image sent for a w x h px image (upright)."""
    return client_fit_size(*image_upscale_size(w, h, budget), budget)


def fit_pixels(a: np.ndarray, budget: Budget) -> np.ndarray:
    """(H, W, 3) RGB pixels fitted as the client fits them (LANCZOS), when that changes their size: in RGB,
    or for a page whose every pixel is gray on its one channel, (H, W), which is each channel of the RGB
    fit exactly. Pixels the fit leaves as they are come back as they are (the encoder finds them gray)."""
    size = client_fit_size(a.shape[1], a.shape[0], budget)
    if size == (a.shape[1], a.shape[0]):
        return a
    gray = gray_channel(a)
    return resize.lanczos(a if gray is None else gray, size)


def _fit(img: Image.Image, budget: Budget) -> Image.Image:
    """The client's fit of an image, with upstream's filter (LANCZOS); unchanged when it fits."""
    size = client_fit_size(img.width, img.height, budget)
    return img if size == img.size else resize.lanczos_image(img, size)


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
    if kind == "pdf" or kind in office.OFFICE_TYPES:
        try:  # an Office file: its PDF, made by LibreOffice (cached for the pages that follow)
            doc = open_pdf(path, password) if kind == "pdf" else open_pdf(office.pdf_for(path, kind), None)
        except DocumentError as e:
            raise DocumentError(str(e), sha256=h.hexdigest()) from None
        n = len(doc)
        if n == 0:
            raise DocumentError("PDF has no pages" if kind == "pdf" else f"{kind.upper()} has no pages")
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


def _flatten(page) -> bool:
    """Form fields and annotations into the page's content, as upstream does before rendering; False when
    the page had none (pdfium changed nothing)."""
    import pypdfium2.raw as pdfium_c

    return pdfium_c.FPDFPage_Flatten(page.raw, pdfium_c.FLAT_NORMALDISPLAY) != pdfium_c.FLATTEN_NOTHINGTODO


def bitmap_maker(width: int, height: int, format: int, rev_byteorder: bool = False):
    """The page's bitmap, white before pdfium draws (pdf/bitmap.py; imported here, in the worker, so that importing
    this module does not load pdfium). The bench puts pypdfium2's own maker back to compare."""
    from ocrserve.ingest.pdf.bitmap import white_bitmap

    return white_bitmap(width, height, format, rev_byteorder)


def pdf_page_pixels(
    path: str, index: int, budget: Budget, password: str | None = None
) -> tuple[np.ndarray, float, float]:
    """The page as the client sends it, as (H, W, 3) RGB pixels or (H, W) for a gray page (fit_pixels), and
    its size in points: rendered whole at upstream's scale (flattened first, as upstream does), then fitted
    with LANCZOS when that changes its size."""
    doc = open_pdf(path, password)
    try:
        page = doc[index]
    except Exception as e:  # noqa: BLE001
        raise DocumentError(f"page {index + 1} cannot be loaded ({e})") from None
    try:
        w, h = page.get_size()
        if w <= 0 or h <= 0:
            raise DocumentError(f"page {index + 1} has no size")
        if _flatten(page):
            page.close()
            page = doc[index]  # pdfium shows a flattened page's new content only once it is loaded again
        # a packed buffer Python allocates, kept alive by the array below (pdfium's own buffer renders no faster:
        # bench/results/png-render-micro/), made white by numpy rather than by pdfium's fill (pdf/bitmap.py)
        bitmap = page.render(
            scale=pdf_scale(w, h, budget),
            may_draw_forms=True,
            draw_annots=True,
            rev_byteorder=True,
            bitmap_maker=bitmap_maker,
        )
        a = bitmap.to_numpy()
        if a.ndim != 3 or a.shape[2] != 3:  # pdfium chose another format (a gray or alpha bitmap)
            a = np.asarray(bitmap.to_pil().convert("RGB"))
        a = fit_pixels(a, budget)
    finally:
        page.close()
    return a, float(w), float(h)


def pdf_page_image(
    path: str, index: int, budget: Budget, password: str | None = None
) -> tuple[Image.Image, float, float]:
    """pdf_page_pixels as a Pillow RGB image."""
    a, w, h = pdf_page_pixels(path, index, budget, password)
    img = Image.fromarray(a, "L" if a.ndim == 2 else "RGB")
    return img.convert("RGB") if img.mode == "L" else img, w, h


def render_pdf_page(path: str, index: int, budget: Budget, password: str | None = None) -> RenderedPage:
    t0 = time.perf_counter()
    a, w, h = pdf_page_pixels(path, index, budget, password)
    png = encode_pixels(a)
    return RenderedPage(index, png, a.shape[1], a.shape[0], w, h, "pt", time.perf_counter() - t0)


_WIDE_GRAY = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def _gray8(img: Image.Image) -> Image.Image:
    """16- or 32-bit gray as 8-bit L, the values scaled (Pillow's convert clips them to white)."""
    a = np.asarray(img, dtype=np.int64)
    top = int(a.max()) if a.size else 0
    if top > 255:
        a = a * 255 // (65535 if top <= 65535 else top)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "L")


def to_rgb(img: Image.Image) -> Image.Image:
    """An image in RGB as upstream converts it (`convert("RGB")`), except 16- and 32-bit gray, which Pillow
    clips to white: their values are scaled to 8 bits instead (a deliberate difference)."""
    if img.mode in _WIDE_GRAY:
        return _gray8(img).convert("RGB")
    return img if img.mode == "RGB" else img.convert("RGB")


def to_channels(img: Image.Image) -> Image.Image:
    """to_rgb's pixels in the channels they need: a gray image (L, bilevel, 16- or 32-bit gray) as L, whose
    RGB conversion is to_rgb's image, so that it is resized on one channel; any other image in RGB."""
    if img.mode in _WIDE_GRAY:
        return _gray8(img)
    if img.mode in ("L", "1"):
        return img.convert("L") if img.mode == "1" else img
    return to_rgb(img)


# the upscale of a small image is done as upstream does (then fitted down) unless it would pass this many
# times the pixel budget (about 100 MP): a 2,000 x 10 px strip would become 307,200 x 1,536 (0.5 GP,
# seconds and gigabytes); it is resized straight to the size the two steps give
_MAX_UPSCALE = 16


def image_page(img: Image.Image, budget: Budget) -> Image.Image:
    """An upright RGB (or gray L) image as the client sends it: small ones upscaled (LANCZOS), then fitted."""
    size = image_upscale_size(img.width, img.height, budget)
    if size[0] * size[1] > _MAX_UPSCALE * budget.max_pixels:  # a thin strip (10,000 x 10 px): gigapixels
        return resize.lanczos_image(img, client_fit_size(*size, budget))  # in one step, same size
    if size != img.size:
        img = resize.lanczos_image(img, size)
    return _fit(img, budget)


def render_image_page(path: str, index: int, budget: Budget, max_image_pixels: int) -> RenderedPage:
    t0 = time.perf_counter()
    img = _open_image(path, max_image_pixels)
    try:
        if index:
            img.seek(index)
        img = to_channels(ImageOps.exif_transpose(img))  # upright (upstream ignores EXIF orientation)
        w, h = img.size
        if max(w, h) > MAX_ASPECT * min(w, h):
            raise DocumentError(
                f"image {w}x{h} px is too elongated to read (sides {max(w, h) / max(1, min(w, h)):.0f}:1; "
                f"OCR reads images up to {MAX_ASPECT}:1)"
            )
        img = image_page(img, budget)
        img.load()
    except DocumentError:
        raise
    except Exception as e:  # noqa: BLE001 - truncated or corrupt image data
        raise DocumentError(f"corrupt image ({e})") from None
    png = encode_png(img)
    return RenderedPage(index, png, img.width, img.height, float(w), float(h), "px", time.perf_counter() - t0)


def readable(path: str, kind: str) -> tuple[str, str]:
    """(path, type) of the file an engine reads a page's source from (the lite engine: a PDF's text layer):
    an Office file's PDF as "pdf" where open_source made it, else the file itself (it is not converted here)."""
    if kind in office.OFFICE_TYPES:
        try:
            pdf = office.cached_pdf(path)
        except (OSError, DocumentError):
            pdf = None
        if pdf is not None:
            return str(pdf), "pdf"
    return path, kind


def render_page(
    path: str, kind: str, index: int, budget: Budget, password: str | None, max_image_pixels: int
) -> RenderedPage:
    if kind == "pdf":
        return render_pdf_page(path, index, budget, password)
    if kind in office.OFFICE_TYPES:
        return render_pdf_page(office.pdf_for(path, kind), index, budget, None)
    return render_image_page(path, index, budget, max_image_pixels)
