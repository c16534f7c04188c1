"""Generated pages of every kind for the fidelity tests: PDF page sizes, a PDF with text at its very
edge, and a noisy scan-like image."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw
from reportlab.lib import pagesizes
from reportlab.lib.pagesizes import landscape, portrait
from reportlab.lib.units import inch, mm

ISO = {"a4": pagesizes.A4, "a3": pagesizes.A3, "a5": pagesizes.A5}

# PDF page sizes in points (reportlab's): Letter, Legal, A3/A4/A5 both ways, Tabloid, 16:9 slides, an 80 mm
# receipt strip, a tiny label, an A1 poster
PAGES = {
    "letter": pagesizes.LETTER,
    "legal": pagesizes.LEGAL,
    **{
        f"{name}{turn}": way(size)
        for name, size in ISO.items()
        for turn, way in (("", portrait), ("-landscape", landscape))
    },
    "tabloid": pagesizes.TABLOID,
    "slide": (960, 540),
    "receipt": (80 * mm, 400 * mm),
    "label": (2 * inch, 1 * inch),
    "poster": pagesizes.A1,
}


def edge_pdf(path, size, edge_text=True):
    from reportlab.lib.colors import black
    from reportlab.pdfgen import canvas

    w, h = size
    c = canvas.Canvas(str(path), pagesize=size)
    c.setFont("Helvetica", 9)
    c.drawString(36, h - 40, "Heading of the page")
    for i in range(8):
        c.drawString(36, h - 70 - 14 * i, f"line {i}: the quick brown fox jumps over the lazy dog {i * 7}")
    c.rect(36, 36, w - 72, 40)
    if edge_text:  # text at the very edge of the page: it must reach the model
        c.setFillColor(black)
        c.drawString(2, 1, "bottom-edge footer text")
        c.drawString(w - 60, h - 8, "top-right")
        c.rect(0, 0, w, h, stroke=1, fill=0)
    c.showPage()
    c.save()
    return path


def scan(size, mode="RGB", noise: int = 12):
    """Lines of "text" on a page, with +-`noise` on every pixel (0: none; a noisy page's PNG is ~100 times
    the bytes and 10 times the encoding time)."""
    w, h = size
    img = Image.new("RGB", size, (250, 250, 245))
    d = ImageDraw.Draw(img)
    for y in range(10, h - 10, max(12, h // 40)):
        d.line([(10, y), (w - 10 - (y * 7) % (w // 3 + 1), y)], fill=(20, 20, 20), width=2)
    d.rectangle([0, 0, w - 1, h - 1], outline=(0, 0, 0))
    if not noise:
        return img if mode == "RGB" else img.convert(mode)
    rng = np.random.default_rng(w * 7 + h)
    a = np.asarray(img).astype(int) + rng.integers(-noise, noise, (h, w, 3))
    out = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "RGB")
    return out if mode == "RGB" else out.convert(mode)
