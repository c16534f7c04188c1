"""End-to-end tests of the lite engine on documents built here: a born-digital two-page PDF (headings,
two columns, a table, a list, page header/footer) and the same pages as scans (noise, 1.5 degree
rotation) in PNG, TIFF and an image-only PDF."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image
from typer.testing import CliRunner

from ocrserve import Document, Source, load_profile, parse_output, render_markdown
from ocrserve.engines import create_engine
from ocrserve.engines.base import PageInput
from ocrserve.engines.lite.engine import LiteEngine, lite_raw_for
from tests.support import sample as make_sample
from tests.support.lite import PROFILE, T, check_page1, check_page2, image_page_input, pdf_page_input

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- documents


def _scan(img: Image.Image, seed: int) -> Image.Image:
    g = img.convert("L").rotate(1.5, expand=True, fillcolor=255, resample=Image.BICUBIC)
    a = np.asarray(g).astype(np.float32) + np.random.default_rng(seed).normal(0, 16, (g.height, g.width))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB")


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("lite")
    pdf = make_sample.build_sample_pdf(d / "born.pdf")
    pdoc = pdfium.PdfDocument(str(pdf))
    scans = [_scan(pdoc[i].render(scale=170 / 72).to_pil(), i) for i in range(len(pdoc))]
    pdoc.close()
    scans[0].save(d / "scan_p1.png")
    scans[1].save(d / "scan_p2.tiff", compression="tiff_lzw")
    scans[0].save(d / "scanned.pdf", save_all=True, append_images=scans[1:], resolution=170.0)
    return {"pdf": pdf, "png": d / "scan_p1.png", "tiff": d / "scan_p2.tiff", "scanned": d / "scanned.pdf"}


@pytest.fixture(scope="module")
def engine():
    eng = LiteEngine(PROFILE, workers=2)
    yield eng
    eng.close()


async def convert_pages(engine, pages: list[PageInput], profile=PROFILE) -> tuple[Document, list]:
    out, results = [], []
    for p in pages:
        res = await engine.ocr(p)
        assert res.ok, res.error
        results.append(res)
        out.append(parse_output(res.raw, profile, (p.width, p.height), index=p.index, unit=p.unit))
    doc = Document(
        source=Source(path=pages[0].source_path or "x", type=pages[0].source_type, page_count=len(pages)), pages=out
    )
    return doc, results


# ---------------------------------------------------------------- born-digital


async def test_born_digital_pdf_text_layer(engine, docs):
    pages = [pdf_page_input(docs["pdf"], i) for i in range(2)]
    doc, results = await convert_pages(engine, pages)
    assert all(r.extra["verdict"] == "text" for r in results)
    md1 = render_markdown(Document(source=doc.source, pages=doc.pages[:1]))
    md2 = render_markdown(Document(source=doc.source, pages=doc.pages[1:]))
    check_page1(md1, exact=True)
    check_page2(md2, exact=True)
    assert "| North | 2.4 | 1.35 | 18 |" in md2
    for item in T["list"]:
        assert f"- {item}" in md2
    labels = [b.label for b in doc.pages[0].blocks]
    assert labels[0] == "Page-Header" and labels[-1] == "Page-Footer"
    assert "Table" in [b.label for b in doc.pages[1].blocks]
    assert "List-Group" in [b.label for b in doc.pages[1].blocks]
    # boxes are in page coordinates: the right column starts right of the page middle
    right = next(b for b in doc.pages[0].blocks if b.text.startswith(T["right"][0][:20]))
    left = next(b for b in doc.pages[0].blocks if b.text.startswith(T["left"][0][:20]))
    assert left.bbox[2] < pages[0].width / 2 < right.bbox[0]
    assert all(b.bbox_source == "model" for p in doc.pages for b in p.blocks)


async def test_chandra2_profile_space_boxes(docs):
    prof = load_profile("chandra-2")
    page = pdf_page_input(docs["pdf"], 0, prof)
    raw = lite_raw_for(page, prof)
    assert re.search(r'data-bbox="\d+ \d+ \d+ \d+"', raw) and 'data-bbox="[' not in raw
    assert max(int(v) for v in re.findall(r'data-bbox="([\d ]+)"', raw)[0].split()) <= 1000
    parsed = parse_output(raw, prof, (page.width, page.height))
    assert any(b.label == "Section-Header" for b in parsed.blocks)


async def test_html_is_escaped(tmp_path):
    from reportlab.pdfgen import canvas

    p = tmp_path / "esc.pdf"
    c = canvas.Canvas(str(p), pagesize=(300, 200))
    c.setFont("Helvetica", 10)
    c.drawString(20, 150, "if a < b && c > d then <div> stays text")
    c.drawString(20, 130, "second line of the paragraph with more words")
    c.save()
    raw = lite_raw_for(pdf_page_input(p, 0))
    assert "&lt;div&gt;" in raw and "a &lt; b &amp;&amp; c &gt; d" in raw
    text = parse_output(raw, PROFILE, (300, 200)).blocks[0].text
    assert "if a < b && c > d then <div> stays text" in text


# ---------------------------------------------------------------- scans


async def test_scanned_image_only_pdf(engine, docs):
    pages = [pdf_page_input(docs["scanned"], i) for i in range(2)]
    doc, results = await convert_pages(engine, pages)
    assert all(r.extra["verdict"] == "ocr_page" for r in results)
    check_page1(render_markdown(Document(source=doc.source, pages=doc.pages[:1])), exact=False)
    check_page2(render_markdown(Document(source=doc.source, pages=doc.pages[1:])), exact=False)


async def test_scanned_png_and_tiff(engine, docs):
    doc1, _ = await convert_pages(engine, [image_page_input(docs["png"])])
    check_page1(render_markdown(doc1), exact=False)
    doc2, _ = await convert_pages(engine, [image_page_input(docs["tiff"])])
    check_page2(render_markdown(doc2), exact=False)
    # pixel pages: boxes in image pixels
    assert doc1.pages[0].unit == "px" and all(b.bbox[2] <= doc1.pages[0].width + 1e-6 for b in doc1.pages[0].blocks)


# ---------------------------------------------------------------- engine contract


async def test_engine_never_raises(engine, tmp_path):
    bad = PageInput(
        doc_id="x",
        index=0,
        image=Image.new("RGB", (64, 64), "white"),
        width=64,
        height=64,
        source_path=str(tmp_path / "missing.pdf"),
        source_type="pdf",
    )
    res = await engine.ocr(bad)
    assert not res.ok and res.error and "missing.pdf" in res.error and res.engine == "lite"
    notpdf = tmp_path / "junk.pdf"
    notpdf.write_bytes(b"not a pdf at all")
    res = await engine.ocr(
        PageInput(doc_id="j", index=0, image=bad.image, width=64, height=64, source_path=str(notpdf), source_type="pdf")
    )
    assert not res.ok and res.error
    # the pool still works afterwards
    blank = await engine.ocr(PageInput(doc_id="b", index=0, image=bad.image, width=64, height=64, source_type="png"))
    assert blank.ok and blank.raw == ""


def test_engine_factory_and_capacity():
    eng = create_engine("lite", PROFILE, workers=3)
    assert isinstance(eng, LiteEngine) and eng.name == "lite" and eng.capacity() == 6
    eng.close()


# ---------------------------------------------------------------- through the CLI


def test_cli_convert_with_lite(docs, tmp_path):
    from ocrserve.cli import app

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["convert", str(docs["pdf"]), "-o", str(out), "--engine", "lite"])
    assert res.exit_code == 0, res.output
    md = (out / "born" / "born.md").read_text(encoding="utf-8")
    assert md.startswith(f"# {T['title']}")
    check_page1(md.split(T["h_results"])[0], exact=True)
    assert "| Central | 3.1 | 1.62 | 11 |" in md


def test_shipped_sample_is_small_and_converts():
    sample = ROOT / "ocrserve" / "samples" / "sample.pdf"
    assert sample.is_file() and sample.stat().st_size < 100_000
    pages = [pdf_page_input(sample, i) for i in range(2)]
    parsed = [parse_output(lite_raw_for(p), PROFILE, (p.width, p.height), index=p.index) for p in pages]
    md = render_markdown(Document(source=Source(path=str(sample), type="pdf", page_count=2), pages=parsed))
    assert md.startswith(f"# {T['title']}") and "| South | 1.8 | 0.94 | 27 |" in md
