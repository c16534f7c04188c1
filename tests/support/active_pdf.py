"""A PDF with active content (the searchable PDF must not carry it over): document JavaScript and an
open action, an embedded file, a page open action, a Launch link, a file-attachment annotation, and a
plain web link (kept). Written object by object, with a correct cross-reference table."""

from __future__ import annotations

from pathlib import Path

MARKERS = (b"/JavaScript", b"/JS", b"/Launch", b"/EmbeddedFile", b"/FileAttachment", b"/OpenAction", b"/AA")


def active_pdf(path: Path, text: str = "Invoice 4711 total due 99 euros") -> Path:
    content = f"BT /F1 24 Tf 72 700 Td ({text}) Tj ET".encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R /OpenAction 7 0 R"
        b" /Names << /JavaScript << /Names [(hello) 7 0 R] >> /EmbeddedFiles << /Names [(payload.exe) 8 0 R] >> >> >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> /Annots [6 0 R 10 0 R 11 0 R]"
        b" /AA << /O << /S /JavaScript /JS (app.alert('page open')) >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Annot /Subtype /Link /Rect [72 600 300 620] /Border [0 0 0] /A << /S /Launch /F (calc.exe) >> >>",
        b"<< /S /JavaScript /JS (app.alert('document open')) >>",
        b"<< /Type /Filespec /F (payload.exe) /EF << /F 9 0 R >> >>",
        b"<< /Type /EmbeddedFile /Length 12 >>\nstream\nMZ-not-real!\nendstream",
        b"<< /Type /Annot /Subtype /FileAttachment /Rect [72 560 90 580] /FS 8 0 R /Name /PushPin >>",
        b"<< /Type /Annot /Subtype /Link /Rect [72 520 300 540] /Border [0 0 0]"
        b" /A << /S /URI /URI (https://example.org/) >> >>",
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))
    return path
