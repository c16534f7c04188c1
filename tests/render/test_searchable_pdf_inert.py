"""The searchable PDF carries none of the source's active content (#29.15): no document JavaScript or
open action, no embedded file, no Launch link, no file attachment, no page open action; the pages
still look as they did, keep their text, and a plain web link stays."""

from __future__ import annotations

import pypdfium2 as pdfium
from PIL import ImageChops

from tests.cli.support import cli
from tests.support.active_pdf import MARKERS, active_pdf


def _render(path, index=0):
    pdf = pdfium.PdfDocument(str(path))
    try:
        return pdf[index].render(scale=1).to_pil().convert("RGB")
    finally:
        pdf.close()


def test_searchable_pdf_strips_active_content(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    acting = active_pdf(src / "acting.pdf")  # a page open action too: the page goes as a form XObject
    data = acting.read_bytes().replace(b" /AA << /O << /S /JavaScript /JS (app.alert('page open')) >> >>", b"")
    assert data != acting.read_bytes()
    (src / "linked.pdf").write_bytes(data)
    assert all(m in acting.read_bytes() for m in MARKERS)
    out = tmp_path / "out"
    r = cli("convert", str(src), "-o", str(out), "--engine", "lite", "--format", "md,pdf", "-q")
    assert r.returncode == 0, r.stderr
    for name in ("acting", "linked"):
        made = (out / name / f"{name}.pdf").read_bytes()
        assert [m for m in MARKERS if m in made] == [], name
        assert b"calc.exe" not in made and b"payload.exe" not in made and b"MZ-not-real" not in made
        pdf = pdfium.PdfDocument(made)
        try:
            assert len(pdf) == 1 and pdf[0].get_size() == (612, 792)
            assert "Invoice 4711 total due 99 euros" in pdf[0].get_textpage().get_text_range()
        finally:
            pdf.close()
        shown = _render(out / name / f"{name}.pdf")
        assert ImageChops.difference(shown, _render(src / f"{name}.pdf")).getbbox() is None, name
    assert b"https://example.org/" in (out / "linked" / "linked.pdf").read_bytes()  # a web link is no active content
