"""Figure crops: Image, Figure and Diagram blocks cut from the page image and linked."""

from __future__ import annotations

from PIL import Image

from ocrserve import parse_output, render_html, render_markdown
from ocrserve.render import crop_figures
from tests.support.corpus_util import doc_of, parse_corpus

RAW = (
    '<div data-bbox="[0, 0, 1024, 100]" data-label="Text"><p>Intro</p></div>'
    '<div data-bbox="[256, 512, 768, 1024]" data-label="Image"><img alt="A red square"/></div>'
    '<div data-bbox="[0, 0, 2, 2]" data-label="Figure"><img alt="too small"/></div>'
    '<div data-label="Diagram"><p>no box</p></div>'
    '<div data-bbox="[0, 0, 512, 512]" data-label="Diagram"><p>flow A to B</p></div>'
)


def _image(w=400, h=800):
    img = Image.new("RGB", (w, h), "white")
    img.paste((255, 0, 0), (100, 400, 300, 800))  # the Image block's area: x 1/4..3/4, y 1/2..1
    return img


def test_crops_written_and_linked(tmp_path):
    page = parse_output(RAW, "chandra-1", (612, 792))
    written = crop_figures(page, _image(), tmp_path, "doc")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["images/doc_p1_b1.png", "images/doc_p1_b4.png"]
    with Image.open(written[0]) as crop:
        assert crop.size == (200, 400)
        assert crop.getpixel((100, 200)) == (255, 0, 0) and crop.getpixel((0, 0)) == (255, 0, 0)
    image, small, nobox, diagram = page.blocks[1:]
    assert image.figure == "images/doc_p1_b1.png" and image.markdown == "![A red square](images/doc_p1_b1.png)"
    assert small.figure is None and nobox.figure is None  # too small / no box: nothing to crop
    assert diagram.markdown == "![flow A to B](images/doc_p1_b4.png)\n\nflow A to B"
    doc = doc_of(page)
    assert "![A red square](images/doc_p1_b1.png)" in render_markdown(doc)
    assert (
        '<figure><img src="images/doc_p1_b1.png" alt="A red square"><figcaption></figcaption></figure>'
        in render_html(doc)
    )


def test_jpeg_and_rgba(tmp_path):
    page = parse_output(RAW, "chandra-1", (612, 792))
    written = crop_figures(page, _image().convert("RGBA"), tmp_path, "scan", fmt="jpg")
    assert written and all(p.suffix == ".jpg" for p in written)
    with Image.open(written[0]) as crop:
        assert crop.format == "JPEG"


def test_corpus_figures(tmp_path):
    page = parse_corpus("c2_all_labels.html")
    crop_figures(page, _image(1000, 1000), tmp_path, "chem")
    labels = {b.label for b in page.blocks if b.figure}
    assert labels == {"Image", "Figure", "Diagram"}
    for b in page.blocks:
        if b.figure:
            assert (tmp_path / b.figure).is_file() and f"]({b.figure})" in b.markdown
