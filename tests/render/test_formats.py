"""The format entry point (render_format, for files and the API) and `ocrserve convert --format`."""

from __future__ import annotations

import json

import pypdfium2 as pdfium
import pytest
from typer.testing import CliRunner

from ocrserve import Document, Source, parse_output
from ocrserve.export.formats import DEFAULT_FORMATS, parse_formats, render_format
from ocrserve.pipeline.output import is_complete, load_existing, write_document
from tests.support.helpers import text_pdf


def test_parse_formats():
    assert parse_formats(None) == DEFAULT_FORMATS == ("md", "html", "json")
    assert parse_formats("pdf") == ("json", "pdf")  # json always: it marks completeness
    assert parse_formats(["chunks,md", "PDF"]) == ("md", "json", "pdf", "chunks")
    assert parse_formats("txt,md") == ("md", "json", "txt")
    with pytest.raises(ValueError, match="format docx, odt: unknown; use md, html, json, pdf, chunks, txt"):
        parse_formats("md,docx,odt")


def _doc(tmp_path) -> Document:
    src = tmp_path / "blank.pdf"
    pdf = pdfium.PdfDocument.new()
    pdf.new_page(612, 792)
    pdf.save(str(src))
    raw = (
        '<div data-bbox="[100, 100, 900, 200]" data-label="Section-Header"><h2>Scanned title</h2></div>'
        '<div data-bbox="[100, 220, 900, 400]" data-label="Text"><p>Body text of the scan.</p></div>'
    )
    page = parse_output(raw, "chandra-1", (612, 792))
    return Document(source=Source(path=str(src), type="pdf", page_count=1), pages=[page])


def test_render_format_gives_bytes_and_media_types(tmp_path):
    doc = _doc(tmp_path)
    md, t = render_format(doc, "md")
    assert t.startswith("text/markdown") and md.decode().startswith("## Scanned title")
    pdf, t = render_format(doc, "pdf")
    text = " ".join(pdfium.PdfDocument(pdf)[0].get_textpage().get_text_range().split())
    assert t == "application/pdf" and "Body text of the scan." in text
    chunks, t = render_format(doc, "chunks", max_tokens=64)
    assert t == "application/x-ndjson"
    [chunk] = [json.loads(line) for line in chunks.decode().splitlines()]
    assert chunk["headings"] == ["Scanned title"] and chunk["pages"] == [1]
    with pytest.raises(ValueError, match="format 'docx': unknown"):
        render_format(doc, "docx")


def test_write_document_formats_and_completeness(tmp_path):
    doc = _doc(tmp_path)
    out = tmp_path / "out"
    folder = write_document(doc, out, "blank", formats=parse_formats("pdf,chunks"))
    assert sorted(p.name for p in folder.iterdir()) == ["blank.chunks.jsonl", "blank.json", "blank.pdf"]
    assert is_complete(load_existing(out, "blank"), None, formats=("json", "pdf", "chunks"))
    assert not is_complete(
        load_existing(out, "blank"), None, formats=DEFAULT_FORMATS
    )  # no .md yet: a run wanting it redoes it
    doc.source.path = str(tmp_path / "gone.pdf")
    with pytest.raises(OSError, match="searchable PDF: .*gone.pdf: no such file"):
        write_document(doc, out, "blank", formats=("json", "pdf"))
    assert (out / "blank" / "blank.pdf").is_file()  # the earlier output stays


def test_cli_format_option(tmp_path):
    from ocrserve.cli import app

    src = text_pdf(tmp_path / "born.pdf", pages=1, title="Formats")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["convert", str(src), "-o", str(out), "--engine", "lite", "--format", "md", "--format", "pdf,chunks"]
    )
    assert res.exit_code == 0, res.output
    files = sorted(p.name for p in (out / "born").iterdir())
    assert files == ["born.chunks.jsonl", "born.json", "born.md", "born.pdf"]
    # the born-digital page keeps its own text layer: the PDF's text is the source's
    before = pdfium.PdfDocument(str(src))[0].get_textpage().get_text_range()
    assert pdfium.PdfDocument(str(out / "born" / "born.pdf"))[0].get_textpage().get_text_range() == before
    # nothing to add: the source's page as it is (in a new PDF without the source's active content)
    shown, source = (pdfium.PdfDocument(str(p))[0].render().to_pil() for p in (out / "born" / "born.pdf", src))
    assert shown.tobytes() == source.tobytes()
    chunks = [
        json.loads(line) for line in (out / "born" / "born.chunks.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert chunks and chunks[0]["headings"] and "quick brown fox" in " ".join(c["text"] for c in chunks)
    res = CliRunner().invoke(app, ["convert", str(src), "-o", str(out), "--engine", "lite", "--format", "docx"])
    assert res.exit_code == 2 and "format docx: unknown" in res.output
