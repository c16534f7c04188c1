"""Document type from the content, not the extension (an Office file's zip or OLE container: ingest/office.py)."""

from __future__ import annotations

from pathlib import Path

from ocrserve.ingest.office import OFFICE_EXTENSIONS, office_kind

PDF_AND_IMAGE_EXTENSIONS = {".pdf", ".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif", ".jfif"}
DOC_EXTENSIONS = PDF_AND_IMAGE_EXTENSIONS | set(OFFICE_EXTENSIONS)


def sniff_bytes(head: bytes) -> str | None:
    """pdf, png, jpeg, webp, tiff, bmp, gif, or None when the bytes are none of them."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:2] == b"BM" and len(head) >= 26:
        return "bmp"
    if b"%PDF-" in head[:1024]:
        return "pdf"
    return None


def sniff_file(path: Path) -> str | None:
    """sniff_bytes' type, else an Office type (docx, xlsx, pptx, odt, ods, odp, rtf, html, doc, xls, ppt)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    return sniff_bytes(head[:1024]) or office_kind(Path(path), head)


def describe_unknown(path: Path) -> str:
    """Why a file is not a document we read, in words."""
    try:
        size = path.stat().st_size
    except OSError as e:
        return f"cannot read file: {e.strerror or e}"
    if size == 0:
        return "empty file (0 bytes)"
    with open(path, "rb") as f:
        head = f.read(512)
    if path.suffix.lower() == ".pdf":
        return "not a PDF (no %PDF- header)"
    try:
        head.decode("utf-8")
        kind = "a text file"
    except UnicodeDecodeError:
        kind = "an unknown binary format"
    return f"unsupported file type: {kind}, not PDF/PNG/JPEG/WebP/TIFF/BMP/GIF or an Office document"
