"""Documents the tests make: PDFs with text (pypdfium2 + reportlab), images, bad files; a child process stopped or awaited."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from PIL import Image, ImageDraw


def text_pdf(path: Path, pages: int = 3, size=(612, 792), title: str = "Doc") -> Path:
    """A born-digital PDF with a heading and a paragraph on each page (reportlab)."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=size)
    for i in range(pages):
        c.setFont("Helvetica-Bold", 20)
        c.drawString(72, size[1] - 90, f"{title} page {i + 1}")
        c.setFont("Helvetica", 11)
        for j in range(12):
            c.drawString(
                72, size[1] - 130 - 16 * j, f"Line {j} of page {i + 1}: the quick brown fox jumps over the lazy dog."
            )
        c.showPage()
    c.save()
    return path


def letter_canvas(path: Path, font: str = "Helvetica", size: float = 11):
    """A reportlab canvas for a US Letter page (612 x 792 pt) written to `path`, its font set."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    c.setFont(font, size)
    return c


def text_pdfs(folder: Path, *names: str, pages: int = 1) -> Path:
    """`folder` (made) holding a text PDF of `pages` pages for each name."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        text_pdf(folder / name, pages=pages)
    return folder


def blank_pdf(path: Path, pages: int, size=(612, 792)) -> Path:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    for _ in range(pages):
        pdf.new_page(*size)
    pdf.save(str(path))
    pdf.close()
    return path


def encrypted_pdf(path: Path, password: str = "secret") -> Path:
    from reportlab.lib import pdfencrypt
    from reportlab.pdfgen import canvas

    enc = pdfencrypt.StandardEncryption(password, canPrint=1)
    c = canvas.Canvas(str(path), encrypt=enc)
    c.drawString(72, 720, "Secret page")
    c.showPage()
    c.save()
    return path


def image(path: Path, size=(800, 600), text: str = "Hello", fmt: str | None = None, **save) -> Path:
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    d.rectangle((10, 10, size[0] - 10, size[1] // 3), outline="black", width=3)
    d.text((20, 20), text, fill="black")
    img.save(path, format=fmt, **save)
    return path


def huge_png(path: Path, side: int = 20000) -> Path:
    """A 20,000 x 20,000 PNG that is tiny on disk (a decompression bomb)."""
    Image.new("1", (side, side), 1).save(path, format="PNG", optimize=True)
    return path


def truncated_jpeg(path: Path) -> Path:
    buf = io.BytesIO()
    Image.new("RGB", (640, 480), "gray").save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    path.write_bytes(data[: len(data) // 2])
    return path


def stop_process(proc) -> None:
    """Stop a child process a test started: SIGTERM, then SIGKILL if it lingers."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def pid_gone(pid: int, timeout: float) -> bool:
    """Whether process `pid` is gone, or goes within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def until(check, what: str = "", timeout: float = 60.0, step: float = 0.1):
    """Poll `check()` until it answers something true, and answer that; an assertion error naming `what` (else
    check's docstring) after `timeout` seconds (a deadline against hanging, not a speed check)."""
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"{what or check.__doc__ or check} did not happen within {timeout:g} s"
        time.sleep(step)
    return got


def start_chromium(chromium: str, profile: Path, window: str, timeout: float = 90):
    """Headless Chromium with DevTools on a free port: (process, the first page's DevTools WebSocket URL).
    The caller stops the process (stop_process)."""
    import socket
    import subprocess
    import time

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-sync",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--remote-debugging-port={port}",
            "--remote-allow-origins=*",
            f"--window-size={window}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                pages = [
                    t
                    for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                    if t.get("type") == "page"
                ]
                if pages:
                    return proc, pages[0]["webSocketDebuggerUrl"]
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "chromium did not start"
            time.sleep(0.1)
    except BaseException:
        stop_process(proc)
        raise


def justify(c, x: float, y: float, line: str, width: float, font: str, size: float, last: bool) -> None:
    """Draw `line` on a reportlab canvas justified to `width` (the last line of a paragraph left-aligned)."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    c.setFont(font, size)
    words = line.split()
    if last or len(words) < 2:
        c.drawString(x, y, line)
        return
    space = (width - sum(stringWidth(w, font, size) for w in words)) / (len(words) - 1)
    for w in words:
        c.drawString(x, y, w)
        x += stringWidth(w, font, size) + space


def noisy_scan(pdf: Path, png: Path, dpi: float, angle: float, seed: int, sigma: float) -> Path:
    """The PDF's first page as a scan: rendered in gray at `dpi`, turned `angle` degrees, Gaussian noise."""
    import numpy as np
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    img = doc[0].render(scale=dpi / 72).to_pil().convert("L")
    doc.close()
    img = img.rotate(angle, fillcolor=255, resample=Image.Resampling.BICUBIC)
    a = np.asarray(img).astype(np.float32) + np.random.default_rng(seed).normal(0, sigma, (img.height, img.width))
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB").save(png)
    return png
