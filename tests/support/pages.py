"""Generated pages of every kind for the fidelity tests: PDF page sizes, a PDF with text at its very
edge, and a noisy scan-like image."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

# PDF page sizes in points: Letter, Legal, A3/A4/A5 both ways, Tabloid, 16:9 slides, a receipt strip,
# a tiny label, a poster
PAGES = {
    "letter": (612, 792),
    "legal": (612, 1008),
    "a4": (595.28, 841.89),
    "a4-landscape": (841.89, 595.28),
    "a3": (841.89, 1190.55),
    "a3-landscape": (1190.55, 841.89),
    "a5": (419.53, 595.28),
    "a5-landscape": (595.28, 419.53),
    "tabloid": (792, 1224),
    "slide": (960, 540),
    "receipt": (226.77, 1133.86),
    "label": (144, 72),
    "poster": (1684, 2384),
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


def scan(size, mode="RGB"):
    w, h = size
    img = Image.new("RGB", size, (250, 250, 245))
    d = ImageDraw.Draw(img)
    for y in range(10, h - 10, max(12, h // 40)):
        d.line([(10, y), (w - 10 - (y * 7) % (w // 3 + 1), y)], fill=(20, 20, 20), width=2)
    d.rectangle([0, 0, w - 1, h - 1], outline=(0, 0, 0))
    rng = np.random.default_rng(w * 7 + h)
    a = np.asarray(img).astype(int) + rng.integers(-12, 12, (h, w, 3))
    out = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "RGB")
    return out if mode == "RGB" else out.convert(mode)
