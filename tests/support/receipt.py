"""Generated receipts for the lite tests (#30.6): a narrow strip, a shop name and address centred on top,
item names on the left and their prices right-aligned (a big gap between, dotted leaders on some rows),
a total line and a thank-you line; as a born-digital PDF on the 80 mm receipt page of tests/support/pages.py
(its text layer) and as a noisy, slightly turned photo-like scan drawn with Pillow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tests.support.pages import PAGES

SHOP = ["CORNER MARKET", "12 Harbour Street, Leith", "Tel 0131 555 0199"]
ITEMS = [
    ("Whole milk 2L", "2.15"),
    ("Sourdough loaf", "3.40"),
    ("Free range eggs x6", "2.95"),
    ("Cheddar 400g", "4.10"),
    ("Bananas 1.2kg", "1.38"),
    ("Ground coffee", "5.75"),
    ("Dish soap", "1.99"),
    ("Tomatoes 500g", "1.60"),
]
TOTALS = [("SUBTOTAL", "19.43"), ("VAT 20%", "3.89"), ("TOTAL", "23.32"), ("CARD", "23.32")]
FOOTER = ["Thank you for shopping with us", "12/03/2025 14:32  Till 3"]
ROWS = ITEMS + TOTALS


def receipt_pdf(path: Path) -> Path:
    """The receipt on an 80 mm strip: Courier names, prices right-aligned at the right margin, dotted
    leaders on every other item row."""
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.pdfgen import canvas

    w, h = PAGES["receipt"]
    c = canvas.Canvas(str(path), pagesize=(w, h))
    y = h - 30
    c.setFont("Helvetica-Bold", 11)
    c.drawCentredString(w / 2, y, SHOP[0])
    c.setFont("Helvetica", 8)
    for t in SHOP[1:]:
        y -= 12
        c.drawCentredString(w / 2, y, t)
    y -= 26
    left, right = 12, w - 12
    for n, (name, price) in enumerate(ROWS):
        if n == len(ITEMS):  # a rule before the totals
            c.line(left, y + 4, right, y + 4)
            y -= 10
        font = "Courier-Bold" if name == "TOTAL" else "Courier"
        c.setFont(font, 8.5)
        c.drawString(left, y, name)
        c.drawRightString(right, y, price)
        if n % 2 and n < len(ITEMS):
            x = left + stringWidth(name, font, 8.5) + 6
            end = right - stringWidth(price, font, 8.5) - 6
            c.drawString(x, y, "." * int((end - x) / stringWidth(".", font, 8.5)))
        y -= 13
    y -= 14
    c.setFont("Helvetica", 8)
    for t in FOOTER:
        c.drawCentredString(w / 2, y, t)
        y -= 11
    c.showPage()
    c.save()
    return path


def receipt_png(path: Path, seed: int = 3, turn: float = 0.7) -> Path:
    """The receipt drawn with Pillow (its bundled scalable font) on a 420 px wide strip of warm paper,
    turned by `turn` degrees, with noise and a little blur of the print."""
    width, size = 420, 19
    font = ImageFont.load_default(size=size)
    bold = ImageFont.load_default(size=size + 5)
    height = 150 + 30 * (len(ROWS) + 2) + 110
    img = Image.new("L", (width, height), 238)
    d = ImageDraw.Draw(img)
    y = 24
    for n, t in enumerate(SHOP):
        f = bold if n == 0 else font
        d.text((width / 2, y), t, font=f, fill=30, anchor="mt")
        y += 34 if n == 0 else 26
    y += 26
    left, right = 22, width - 22
    for n, (name, price) in enumerate(ROWS):
        if n == len(ITEMS):
            d.line([(left, y - 6), (right, y - 6)], fill=60, width=2)
            y += 12
        d.text((left, y), name, font=font, fill=25, anchor="lt")
        d.text((right, y), price, font=font, fill=25, anchor="rt")
        if n % 2 and n < len(ITEMS):
            x0 = left + d.textlength(name, font=font) + 10
            x1 = right - d.textlength(price, font=font) - 10
            d.text((x0, y), "." * int((x1 - x0) / d.textlength(".", font=font)), font=font, fill=90, anchor="lt")
        y += 30
    y += 26
    for t in FOOTER:
        d.text((width / 2, y), t, font=font, fill=30, anchor="mt")
        y += 26
    img = img.rotate(turn, fillcolor=238, resample=Image.Resampling.BICUBIC)
    a = np.asarray(img).astype(np.float32) + np.random.default_rng(seed).normal(0, 14, (img.height, img.width))
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB").save(path)
    return path
