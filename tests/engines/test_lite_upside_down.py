"""Scans upside down (issue 30.6): the sample PDF's first page rasterised with noise and a slight skew,
turned by a half, as a PNG and as an image-only PDF; lite reads it upright (RapidOCR's text direction
classifier on the widest lines, confirmed by a second reading) and puts its boxes back on the page as
it is stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image

from ocrserve.engines.lite.engine import page_raw
from tests.support import sample as make_sample
from tests.support.lite import T, check_page1, image_page_input, page_markdown, pdf_page_input, word_f1


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("upside")
    pdf = make_sample.build_sample_pdf(d / "born.pdf")
    doc = pdfium.PdfDocument(str(pdf))
    page = doc[0].render(scale=170 / 72).to_pil().convert("L")
    doc.close()
    g = page.rotate(181.2, expand=True, fillcolor=255, resample=Image.BICUBIC)  # a half turn, slightly skewed
    a = np.asarray(g).astype(np.float32) + np.random.default_rng(7).normal(0, 14, (g.height, g.width))
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB")
    img.save(d / "upside.png")
    img.save(d / "upside.pdf", resolution=170.0)
    page.convert("RGB").save(d / "upright.png")
    return {"pdf": pdf, "png": d / "upside.png", "scanned": d / "upside.pdf", "upright": d / "upright.png"}


@pytest.mark.parametrize("kind", ["png", "scanned"])
def test_upside_down_scan_reads_upright(scans, kind):
    page = image_page_input(scans["png"]) if kind == "png" else pdf_page_input(scans["scanned"], 0)
    md, parsed = page_markdown(page)
    blocks = parsed.blocks
    want = "\n".join([T["title"], T["intro"], *T["left"], *T["right"]])
    assert word_f1(md, want) >= 0.9, md
    check_page1(md, exact=False)
    # boxes on the page as stored: the title, at the top of the upright page, is at the bottom here
    title = next(b for b in blocks if b.text.strip().startswith(T["title"][:12]))
    assert title.bbox[1] > page.height / 2, title.bbox


def test_upright_scan_is_not_turned(scans):
    img = Image.open(scans["upright"]).convert("RGB")
    out = page_raw({"source_type": "png", "image": img, "index": 0, "options": {}})
    assert out.get("rotation", 0) == 0 and T["title"] in out["raw"]
