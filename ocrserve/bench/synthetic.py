"""Distinct synthetic pages of realistic density: paragraphs, a table, formulas, several page sizes.

Distinct, because identical pages hit vLLM's prefix and multimodal caches and hide the prefill cost.
Pages are born-digital PDFs when reportlab is installed, else images drawn with Pillow put into a
PDF (each page still distinct).
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will more can "
    "revenue margin quarter analysis model protein sample clause agreement tenant lessor theorem proof "
    "integral variance estimate regression coefficient cohort patient dosage liability warranty "
    "indemnify shipment invoice balance equity dividend subsidiary segment forecast parameter"
).split()
SIZES = [(612, 792), (595, 842), (612, 1008), (842, 595)]  # Letter, A4, Legal, A4 landscape
FORMULAS = [
    "E = mc^2",
    "f(x) = a x^2 + b x + c",
    "sum_{i=1}^{n} x_i / n",
    "P(A|B) = P(B|A) P(A) / P(B)",
    "int_0^1 x^2 dx = 1/3",
    "sigma^2 = E[(X - mu)^2]",
]


def _para(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def _wrap(text: str, width: int) -> list[str]:
    lines, cur = [], ""
    for w in text.split():
        if len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return lines


def make_pdf(path: Path, pages: int, seed: int = 0, born_digital: bool | None = None) -> Path:
    """Write a PDF of `pages` distinct pages to `path`."""
    try:
        import reportlab  # noqa: F401

        have_rl = True
    except ImportError:
        have_rl = False
    if born_digital is None:
        born_digital = have_rl
    path.parent.mkdir(parents=True, exist_ok=True)
    if born_digital:
        if not have_rl:
            raise RuntimeError("born-digital synthetic pages need reportlab (pip install reportlab)")
        return _make_reportlab(path, pages, seed)
    return _make_pillow(path, pages, seed)


def _layout(rng: random.Random, i: int, w: float, h: float):
    """Yield (kind, x, y, text/size) items in points from the top-left."""
    y = 60.0
    yield ("title", 54, y, f"Section {i + 1}: {_para(rng, 5)[:-1]}")
    y += 36
    while y < h - 120:
        r = rng.random()
        if r < 0.6:
            for line in _wrap(_para(rng, rng.randint(40, 90)), int((w - 108) / 5.2)):
                if y > h - 80:
                    break
                yield ("text", 54, y, line)
                y += 13
            y += 8
        elif r < 0.8:
            rows, cols = rng.randint(3, 7), rng.randint(3, 5)
            cw = (w - 108) / cols
            for rr in range(rows):
                if y > h - 80:
                    break
                for c in range(cols):
                    txt = rng.choice(WORDS).capitalize() if rr == 0 else f"{rng.uniform(0, 9999):.2f}"
                    yield ("cell", 54 + c * cw, y, (txt, cw, 16))
                y += 16
            y += 12
        else:
            yield ("formula", w / 2 - 80, y, rng.choice(FORMULAS) + f"  ({i + 1}.{int(y)})")
            y += 26
    yield ("footer", w / 2 - 20, h - 40, f"Page {i + 1}")


def _make_reportlab(path: Path, pages: int, seed: int) -> Path:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    for i in range(pages):
        rng = random.Random(seed * 1_000_003 + i)
        w, h = SIZES[i % len(SIZES)]
        c.setPageSize((w, h))
        for kind, x, y, item in _layout(rng, i, w, h):
            if kind == "title":
                c.setFont("Helvetica-Bold", 16)
                c.drawString(x, h - y, item)
            elif kind == "text":
                c.setFont("Times-Roman", 10)
                c.drawString(x, h - y, item)
            elif kind == "cell":
                txt, cw, ch = item
                c.rect(x, h - y - 4, cw, ch, stroke=1, fill=0)
                c.setFont("Helvetica", 9)
                c.drawString(x + 3, h - y + 1, txt)
            elif kind == "formula":
                c.setFont("Times-Italic", 12)
                c.drawString(x, h - y, item)
            else:
                c.setFont("Helvetica", 8)
                c.drawString(x, h - y, item)
        c.showPage()
    c.save()
    return path


def _make_pillow(path: Path, pages: int, seed: int, dpi: int = 150) -> Path:
    from PIL import Image, ImageDraw

    def font(size: int):
        return _font(size)

    k = dpi / 72
    fonts = {
        "title": font(int(16 * k)),
        "text": font(int(10 * k)),
        "cell": font(int(9 * k)),
        "formula": font(int(12 * k)),
        "footer": font(int(8 * k)),
    }
    images = []
    for i in range(pages):
        rng = random.Random(seed * 1_000_003 + i)
        w, h = SIZES[i % len(SIZES)]
        img = Image.new("L", (int(w * k), int(h * k)), 255)
        d = ImageDraw.Draw(img)
        for kind, x, y, item in _layout(rng, i, w, h):
            if kind == "cell":
                txt, cw, ch = item
                d.rectangle((x * k, (y - 11) * k, (x + cw) * k, (y - 11 + ch) * k), outline=0)
                d.text(((x + 3) * k, (y - 9) * k), txt, fill=0, font=fonts["cell"])
            else:
                d.text((x * k, (y - 10) * k), item, fill=0, font=fonts[kind])
        images.append(img)
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=dpi)
    return path


# the standard page of the GPU figures: US Letter at 192 dpi = 1632 x 2112 pixels (51 x 66 = 3,366 visual tokens)
STANDARD_PAGE = (1632, 2112)


def standard_page_png(seed: int, size: tuple[int, int] = STANDARD_PAGE) -> bytes:
    """One distinct Letter page drawn at `size` pixels, as PNG bytes (lossless: what the model sees is fixed)."""
    import io

    from PIL import Image, ImageDraw

    w_px, h_px = size
    k = w_px / 612

    def font(pt: float):
        return _font(max(6, int(pt * k)))

    fonts = {"title": font(16), "text": font(10), "cell": font(9), "formula": font(12), "footer": font(8)}
    rng = random.Random(seed * 7_919 + 17)
    img = Image.new("RGB", (w_px, h_px), (255, 255, 255))
    d = ImageDraw.Draw(img)
    for kind, x, y, item in _layout(rng, seed, 612, h_px / k):
        if kind == "cell":
            txt, cw, ch = item
            d.rectangle((x * k, (y - 11) * k, (x + cw) * k, (y - 11 + ch) * k), outline=(0, 0, 0))
            d.text(((x + 3) * k, (y - 9) * k), txt, fill=(0, 0, 0), font=fonts["cell"])
        else:
            d.text((x * k, (y - 10) * k), item, fill=(0, 0, 0), font=fonts[kind])
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _font(px: int):
    """A serif font at `px` pixels: DejaVu or Liberation where installed, else Pillow's own."""
    from PIL import ImageFont

    for name in ("DejaVuSerif.ttf", "DejaVuSans.ttf", "LiberationSerif-Regular.ttf"):
        try:
            return ImageFont.truetype(name, px)
        except OSError:
            continue
    try:
        return ImageFont.load_default(size=px)
    except TypeError:
        return ImageFont.load_default()
