"""The lite engine's layout on small PDFs built here (reportlab): a page turned by /Rotate, a vertical
margin watermark, a table with a header row and multi-line cells, running headers / footers over
several pages, hyphenation, spacing accents, two columns, slanted column heads."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image

from ocrserve import Document, Source, parse_output, render_markdown
from ocrserve.engines.base import PageInput
from ocrserve.engines.lite.engine import lite_raw_for
from ocrserve.engines.lite.layout import build_blocks
from ocrserve.ingest.pdf.textlayer import analyze_page
from tests.support.helpers import letter_canvas
from tests.support.lite import BODY, PROFILE, H, W, image_page_input, page_markdown, paragraph, text_layer_markdown


def _labels(page) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for b in page.blocks:
        out.setdefault(b.label, []).append(b.html)
    return out


# ---------------------------------------------------------------- rotation


def test_page_with_rotate_90_reads_in_whole_lines(tmp_path):
    """/Rotate 90 over landscape content (reportlab sets the page size as displayed): the displayed
    page is portrait and its text runs downwards; it is turned back upright (the landscape page)."""
    path = tmp_path / "rot.pdf"
    c = letter_canvas(path)
    c.setPageRotation(90)
    paragraph(c, BODY, y=520)
    c.showPage()
    c.save()
    doc = pdfium.PdfDocument(str(path))
    assert doc[0].get_rotation() == 90
    report = analyze_page(doc[0])
    doc.close()
    assert report.rotation == 90 and report.width > report.height  # the landscape page, upright
    assert [l.text for l in sorted(report.lines, key=lambda l: l.y0)] == BODY
    md, _ = text_layer_markdown(path)
    assert " ".join(BODY) in md


def test_vertical_margin_watermark_is_kept_out_of_the_flow(tmp_path):
    path = tmp_path / "mark.pdf"
    mark = "Downloaded from example.org on 1 May 2024 by a reader"
    c = letter_canvas(path)
    paragraph(c, BODY)
    c.saveState()
    c.translate(30, 200)
    c.rotate(90)
    c.setFont("Helvetica", 8)
    c.drawString(0, 0, mark)
    c.restoreState()
    c.showPage()
    c.save()
    md, page = text_layer_markdown(path)
    assert " ".join(BODY) in md
    assert "Downloaded" not in md and "\nD\n" not in md
    headers = _labels(page).get("Page-Header", [])
    assert any(mark in h for h in headers), headers  # kept whole, labelled out of the flow


# ---------------------------------------------------------------- tables


def test_table_with_header_row_and_multi_line_cells(tmp_path):
    path = tmp_path / "table.pdf"
    c = letter_canvas(path)
    c.drawString(72, 740, "The controls below were checked during the audit of the plant.")
    cols = [72, 250, 420]
    y = 700
    c.setFont("Helvetica-Bold", 10)
    for x, t in zip(cols, ["Control", "Requirement", "Status"]):
        c.drawString(x, y, t)
    rows = [
        (["Access"], ["Badges for all staff", "and for every visitor"], ["Done"]),
        (["Backups"], ["Nightly copies kept", "off site for a year"], ["Open"]),
        (["Training"], ["Yearly course"], ["Done"]),
        (["Logging"], ["Events kept ninety days"], ["Late"]),
    ]
    c.setFont("Helvetica", 10)
    y -= 22
    for row in rows:
        depth = max(len(cell) for cell in row)
        for x, cell in zip(cols, row):
            for k, t in enumerate(cell):
                c.drawString(x, y - 12 * k, t)
        y -= 12 * depth + 10
    c.showPage()
    c.save()
    _, page = text_layer_markdown(path)
    tables = _labels(page).get("Table", [])
    assert len(tables) == 1
    html = tables[0]
    assert "<th>Control</th><th>Requirement</th><th>Status</th>" in html
    assert "<td>Access</td><td>Badges for all staff and for every visitor</td><td>Done</td>" in html
    assert "<td>Backups</td><td>Nightly copies kept off site for a year</td><td>Open</td>" in html
    assert html.count("<tr>") == 5
    # no cell text leaks out of the table as loose paragraphs
    assert not any("visitor" in h for h in _labels(page).get("Text", []))


def test_slanted_column_heads_become_the_header_row(tmp_path):
    path = tmp_path / "slant.pdf"
    c = letter_canvas(path)
    cols = [220, 270, 320]
    heads = ["Completion", "Procedure", "Knowledge"]
    for x, t in zip(cols, heads):
        c.saveState()
        c.translate(x + 2, 712)
        c.rotate(45)
        c.setFont("Helvetica", 8)
        c.drawString(0, 0, t)
        c.restoreState()
    c.setFont("Helvetica", 9)
    for i, name in enumerate(["Clustering", "Regression", "Rules", "Discovery"]):
        y = 695 - 12 * i
        c.drawString(72, y, name)
        for k, x in enumerate(cols):
            c.drawString(x, y, f"0.{i}{k}")
    c.showPage()
    c.save()
    _, page = text_layer_markdown(path)
    html = _labels(page)["Table"][0]
    assert "<th>Completion</th><th>Procedure</th><th>Knowledge</th>" in html
    assert "<td>Clustering</td><td>0.00</td><td>0.01</td><td>0.02</td>" in html


# ---------------------------------------------------------------- running headers and footers


def _report_pages(path: Path, pages: int = 4) -> None:
    c = letter_canvas(path)
    for p in range(pages):
        c.setFont("Helvetica", 11)
        # set at the top like body text, no gap: only the other pages show it is a running head
        c.drawString(72, 700, "Delta Survey Quarterly Review, issue four")
        opening = ["Spring", "Summer", "Autumn", "Winter"][p % 4]
        body = BODY[p % 4 :] + BODY[: p % 4]  # each page its own text
        paragraph(c, [f"{opening} brings its own changes to the channels of the river."] + body, y=685)
        c.setFont("Helvetica", 9)
        c.drawString(72, 100, f"Confidential draft, section {p + 1} of {pages}")
        paragraph(c, ["The last body line sits right above the footer of this page."], y=112)
        c.showPage()
    c.save()


def test_running_header_and_footer_found_across_pages(tmp_path):
    path = tmp_path / "report.pdf"
    _report_pages(path)
    for index in range(4):
        md, page = text_layer_markdown(path, index)
        labels = _labels(page)
        assert any("Quarterly Review" in h for h in labels.get("Page-Header", [])), labels
        assert any("Confidential draft" in h for h in labels.get("Page-Footer", [])), labels
        assert "Quarterly Review" not in md and "Confidential" not in md
        assert ["Spring", "Summer", "Autumn", "Winter"][index] + " brings its own changes" in md


def test_running_lines_need_the_other_pages(tmp_path):
    """The same page alone (no document context) keeps the line in the body."""
    path = tmp_path / "report.pdf"
    _report_pages(path)
    doc = pdfium.PdfDocument(str(path))
    report = analyze_page(doc[1])
    doc.close()
    blocks = build_blocks(report.lines, report.width, report.height)
    assert any("Quarterly Review" in b.html for b in blocks if b.label in ("Text", "Section-Header"))


# ---------------------------------------------------------------- paragraphs and characters


def test_hyphenated_line_ends_are_joined(tmp_path):
    path = tmp_path / "hyph.pdf"
    c = letter_canvas(path)
    paragraph(
        c,
        [
            "The council voted for the replace-",
            "ment of the old bridge over the river",
            "before the winter floods arrive.",
        ],
    )
    c.showPage()
    c.save()
    md, _ = text_layer_markdown(path)
    assert "the replacement of the old bridge over the river before the winter floods arrive." in md


def test_spacing_accents_are_composed(tmp_path):
    """TeX-style accents: a letter and an accent glyph drawn over it -> one precomposed letter."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    path = tmp_path / "accent.pdf"
    c = letter_canvas(path, size=12)
    x, y = 72, 700
    c.drawString(x, y, "We thank J")
    x += stringWidth("We thank J", "Helvetica", 12)
    c.drawString(x, y, "a")
    aw = stringWidth("a", "Helvetica", 12)
    c.drawString(x + (aw - stringWidth("\u00b4", "Helvetica", 12)) / 2, y + 1, "\u00b4")
    c.drawString(x + aw, y, "n for his help.")
    paragraph(c, BODY, y=670)
    c.showPage()
    c.save()
    md, _ = text_layer_markdown(path)
    assert "We thank J\u00e1n for his help." in md
    assert "\u00b4" not in md


def test_two_columns_are_read_column_by_column(tmp_path):
    path = tmp_path / "cols.pdf"
    left = [
        "Left column starts here and it",
        "keeps going with its first",
        "paragraph of plain text.",
        "",
        "Its second paragraph is set",
        "also on the left side.",
    ]
    right = [
        "Right column text begins with",
        "another paragraph that then",
        "reads on in the same way.",
        "",
        "And the right side has a",
        "second paragraph too.",
    ]
    c = letter_canvas(path)
    for col, x in ((left, 72), (right, 330)):
        y = 700
        for ln in col:
            if ln:
                c.drawString(x, y, ln)
            y -= 15
    c.showPage()
    c.save()
    md, _ = text_layer_markdown(path)
    assert md.index("Left column starts") < md.index("also on the left side.") < md.index("Right column text")
    assert "Left column starts here and it keeps going with its first paragraph of plain text." in md
    assert "Right column text begins with another paragraph that then reads on in the same way." in md


@pytest.mark.parametrize("rot", [180, 270])
def test_other_turns_read_upright(tmp_path, rot):
    path = tmp_path / f"rot{rot}.pdf"
    c = letter_canvas(path)
    c.setPageRotation(rot)
    paragraph(c, BODY, y=520)
    c.showPage()
    c.save()
    md, _ = text_layer_markdown(path)
    assert " ".join(BODY) in md


def test_page_of_slanted_text_stays_in_the_flow(tmp_path):
    """Text that is mostly slanted (no quarter turn rights it) is the page's content, not margin text."""
    path = tmp_path / "slanted.pdf"
    c = letter_canvas(path)
    c.saveState()
    c.translate(100, 200)
    c.rotate(30)
    paragraph(c, BODY[:2], x=0, y=0)
    c.restoreState()
    c.showPage()
    c.save()
    md, _ = text_layer_markdown(path)
    assert BODY[0] in md and BODY[1] in md


def _big_text_pdf(path: Path, rotate: int = 0) -> None:
    c = letter_canvas(path)
    if rotate:
        c.setPageRotation(rotate)
    paragraph(c, BODY[:3], y=520 if rotate else 700, size=14, lead=22)
    c.showPage()
    c.save()


def test_rotated_page_is_rendered_upright_for_ocr(tmp_path):
    from rapidfuzz import fuzz

    path = tmp_path / "rot_ocr.pdf"
    _big_text_pdf(path, 90)
    page = PageInput(
        doc_id="r", index=0, image=Image.new("RGB", (8, 8), "white"), source_path=str(path), source_type="pdf"
    )
    raw = lite_raw_for(page, PROFILE, ocr="always")
    parsed = parse_output(raw, PROFILE, (W, H), index=0)
    md = render_markdown(Document(source=Source(path=str(path), type="pdf", page_count=1), pages=[parsed]))
    assert fuzz.partial_ratio(BODY[0], md) >= 85, md
    # boxes are on the page as displayed (portrait): the text lies across its width, turned
    assert all(b.bbox[3] - b.bbox[1] > b.bbox[2] - b.bbox[0] for b in parsed.blocks if b.label == "Text")


def test_sideways_scan_is_turned_upright(tmp_path):
    from rapidfuzz import fuzz

    path = tmp_path / "p.pdf"
    _big_text_pdf(path)
    doc = pdfium.PdfDocument(str(path))
    img = doc[0].render(scale=150 / 72).to_pil().convert("RGB").rotate(-90, expand=True)  # text runs downwards
    doc.close()
    png = tmp_path / "sideways.png"
    img.save(png)
    md, _ = page_markdown(image_page_input(png))
    assert fuzz.partial_ratio(" ".join(BODY[:3]), md) >= 85, md


def _list_scan(path, bullets: bool):
    """A noisy, sideways JPEG scan of a note with a bulleted list (OCR drops bullet dots)."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (1240, 1754), "white")
    d = ImageDraw.Draw(img)
    try:
        f, fb = ImageFont.truetype("DejaVuSans.ttf", 34), ImageFont.truetype("DejaVuSans-Bold.ttf", 48)
    except OSError:
        f = fb = ImageFont.load_default()
    d.text((120, 120), "Meeting notes", font=fb, fill="black")
    d.text((120, 220), "Things to bring to the meeting on Monday morning:", font=f, fill="black")
    y = 300
    for item in [
        "the signed contract copies",
        "two laptops with chargers",
        "printed agenda for everyone",
        "the budget spreadsheet",
    ]:
        if bullets:
            d.ellipse((140, y + 12, 156, y + 28), fill="black")
        d.text((180, y), item, font=f, fill="black")
        y += 60
    d.text((120, y + 40), "Please arrive ten minutes early so that we can start on time.", font=f, fill="black")
    a = np.asarray(img.rotate(90, expand=True)).astype(np.int16)
    a = np.clip(a + np.random.default_rng(1).normal(0, 28, a.shape), 0, 255).astype(np.uint8)
    Image.fromarray(a).save(path, quality=70)
    return path


def test_bullets_of_a_noisy_sideways_scan_make_a_list(tmp_path):
    import ocrserve

    # both scans in one run: one start of the lite workers (and their RapidOCR) instead of two
    listed, plain = ocrserve.convert(
        [_list_scan(tmp_path / "list.jpg", bullets=True), _list_scan(tmp_path / "plain.jpg", bullets=False)]
    )
    assert (Path(listed.path).name, Path(plain.path).name) == ("list.jpg", "plain.jpg")
    blocks = listed.document.pages[0].blocks
    lists = [b for b in blocks if b.label == "List-Group"]
    assert len(lists) == 1 and lists[0].html.count("<li>") == 4, [(b.label, b.text) for b in blocks]
    assert "two laptops with chargers" in lists[0].text
    # the same note without bullet marks stays running text (the mark decides, not the indent)
    assert not [b for b in plain.document.pages[0].blocks if b.label == "List-Group"]
