"""Office documents the tests make: DOCX (python-docx), XLSX (openpyxl), PPTX (python-pptx), and by hand an
ODT, RTF and HTML file, a corrupt DOCX and an encrypted one (an OLE container holding an EncryptedPackage)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")  # LibreOffice's command, None without it


def docx(path: Path, heading: str = "Contract Alpha", text: str = "The tenant pays the rent monthly.") -> Path:
    import docx as python_docx

    d = python_docx.Document()
    d.add_heading(heading, 1)
    d.add_paragraph(text)
    d.save(str(path))
    return path


def xlsx(path: Path, rows=(("Item", "Price"), ("Widget", 42), ("Gadget", 17))) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    for row in rows:
        ws.append(list(row))
    wb.save(str(path))
    return path


def pptx(path: Path, title: str = "Quarterly Review", body: str = "Revenue grew strongly") -> Path:
    import pptx as python_pptx

    p = python_pptx.Presentation()
    slide = p.slides.add_slide(p.slide_layouts[1])
    slide.shapes.title.text = title
    slide.placeholders[1].text = body
    p.save(str(path))
    return path


_ODT_CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
  xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">
<office:body><office:text><text:p>{text}</text:p></office:text></office:body></office:document-content>"""
_ODT_MANIFEST = """<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>"""


def odt(path: Path, text: str = "An OpenDocument memo about the harbour.") -> Path:
    """A minimal OpenDocument text: the mimetype entry first and stored, then content and manifest."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", _ODT_CONTENT.format(text=text), compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("META-INF/manifest.xml", _ODT_MANIFEST, compress_type=zipfile.ZIP_DEFLATED)
    return path


def rtf(path: Path, text: str = "A rich text letter to the council.") -> Path:
    path.write_text("{\\rtf1\\ansi\\deff0 {\\fonttbl {\\f0 Helvetica;}}\\f0\\fs28 " + text + "\\par}", encoding="ascii")
    return path


def html(path: Path, heading: str = "Hello HTML", text: str = "A web page saved for the archive.") -> Path:
    path.write_text(f"<!DOCTYPE html><html><body><h1>{heading}</h1><p>{text}</p></body></html>", encoding="utf-8")
    return path


def corrupt_docx(path: Path) -> Path:
    path.write_bytes(b"PK\x03\x04" + b"not really a zip archive " * 20)
    return path


def encrypted_docx(path: Path) -> Path:
    """What Office writes for a password-protected DOCX, as far as ocrserve looks: an OLE compound file whose
    directory names an EncryptedPackage stream (the content itself is not a real encryption)."""
    head = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 504
    entry = "EncryptedPackage".encode("utf-16-le").ljust(64, b"\0")
    path.write_bytes(head + b"\0" * 512 + entry + b"\0" * 2048)
    return path
