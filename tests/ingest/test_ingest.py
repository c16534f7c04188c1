"""Sniffing, input expansion, page ranges and page-image sizing."""

from __future__ import annotations

import io
import io as _io
from pathlib import Path

import pytest
from PIL import Image

from ocrserve.ingest.naming import Occupant, path_hash
from ocrserve.ingest.raster import Budget, DocumentError, forget, image_target, open_source, pdf_target, render_page
from ocrserve.ingest.sniff import sniff_bytes
from ocrserve.ingest.sources import InputError, expand_inputs, parse_page_ranges
from ocrserve.profiles import load_profile
from tests.support import helpers

BUDGET = Budget.from_profile(load_profile("chandra-1"))


def test_sniff_by_content_not_extension(tmp_path):
    png = helpers.image(tmp_path / "looks.pdf", fmt="PNG")
    assert sniff_bytes(png.read_bytes()[:64]) == "png"
    jpg = helpers.image(tmp_path / "x.png", fmt="JPEG")
    assert sniff_bytes(jpg.read_bytes()[:64]) == "jpeg"
    assert sniff_bytes(b"%PDF-1.7\n") == "pdf"
    assert sniff_bytes(b"hello world") is None
    assert sniff_bytes(b"") is None


@pytest.mark.parametrize(
    "spec,expected", [("1-3,5", [0, 1, 2, 4]), ("2", [1]), ("3-3, 1", [0, 2]), (None, None), ("", None)]
)
def test_page_ranges(spec, expected):
    sel = parse_page_ranges(spec)
    assert (sel.indices(100) if sel is not None else None) == expected


@pytest.mark.parametrize("bad", ["0", "3-1", "a", "1-b", "-2"])
def test_page_ranges_bad(bad):
    with pytest.raises(InputError, match="--pages"):
        parse_page_ranges(bad)


def test_expand_folders_globs_stdin_and_unique_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    helpers.blank_pdf(tmp_path / "a" / "x.pdf", 1)
    helpers.blank_pdf(tmp_path / "b" / "x.pdf", 1)
    helpers.image(tmp_path / "a" / "scan.png")
    (tmp_path / "a" / "notes.txt").write_text("not a document")
    srcs = expand_inputs([tmp_path])
    names = sorted(s.name for s in srcs)
    assert names == ["a/scan", "a/x", "b/x"]  # folders mirrored; .txt left out
    # the same stem from two explicit folders never collides: the first in the run's own order (not
    # the input order) keeps the plain name, the other gets a hash of its path
    srcs = expand_inputs([tmp_path / "b" / "x.pdf", tmp_path / "a" / "x.pdf"])
    assert [s.name for s in srcs] == [f"x-{path_hash(tmp_path / 'b' / 'x.pdf')}", "x"]
    # names are stable across runs and input orders
    assert sorted(s.name for s in srcs) == sorted(
        s.name for s in expand_inputs([tmp_path / "a" / "x.pdf", tmp_path / "b" / "x.pdf"])
    )
    srcs = expand_inputs([str(tmp_path / "*" / "*.pdf")])
    assert len(srcs) == 2
    srcs = expand_inputs(["-"], stdin=_io.StringIO(f"{tmp_path / 'a' / 'scan.png'}\n\n"))
    assert [s.name for s in srcs] == ["scan"]
    with pytest.raises(InputError, match="matches no file"):
        expand_inputs([str(tmp_path / "nothing*.pdf")])


def test_pdf_page_renders_whole_at_192_dpi(tmp_path):
    pdf = helpers.text_pdf(tmp_path / "t.pdf", pages=2)
    info = open_source(str(pdf), None, 10**8)
    assert info.type == "pdf" and info.page_count == 2 and len(info.sha256) == 64
    rp = render_page(str(pdf), "pdf", 1, BUDGET, None, 10**8)
    assert (rp.width, rp.height, rp.unit) == (612.0, 792.0, "pt")
    assert (rp.image_width, rp.image_height) == (1632, 2112)  # 192 dpi, the whole page (as upstream)
    img = Image.open(io.BytesIO(rp.png))
    assert img.size == (rp.image_width, rp.image_height)
    assert img.getextrema() != ((255, 255), (255, 255), (255, 255))  # the text was drawn
    forget(str(pdf))


def test_sizes_respect_pixel_budget():
    W, H = pdf_target(612 * 4, 792 * 4, BUDGET)  # a poster: capped
    assert W * H <= BUDGET.max_pixels and abs(W / H - 612 / 792) < 0.01
    W, H = pdf_target(200, 300, BUDGET)  # a small page: short side 1024
    assert min(W, H) == 1024
    W, H = image_target(400, 300, BUDGET)  # small image: upscaled, the short side to 1536
    assert (W, H) == (2048, 1536)
    W, H = image_target(6000, 4000, BUDGET)  # big photo: scaled down, aspect kept
    assert W * H <= BUDGET.max_pixels and abs(W / H - 1.5) < 0.01
    b2 = Budget.from_profile(load_profile("chandra-2"))
    W, H = pdf_target(612, 792, b2)  # Chandra 2: on its client's 28-px grid
    assert (W, H) == (1624, 2100)


def test_exif_orientation_applied(tmp_path):
    img = Image.new("RGB", (400, 200), "white")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees
    p = tmp_path / "rot.jpg"
    img.save(p, format="JPEG", exif=exif.tobytes())
    rp = render_page(str(p), "jpeg", 0, BUDGET, None, 10**8)
    assert (rp.width, rp.height) == (200.0, 400.0)
    assert rp.image_height > rp.image_width


def test_tiff_every_frame(tmp_path):
    frames = [Image.new("RGB", (300, 200), c) for c in ("red", "green", "blue")]
    p = tmp_path / "multi.tif"
    frames[0].save(p, save_all=True, append_images=frames[1:])
    info = open_source(str(p), None, 10**8)
    assert (info.type, info.page_count) == ("tiff", 3)
    colors = [
        Image.open(io.BytesIO(render_page(str(p), "tiff", i, BUDGET, None, 10**8).png)).getpixel((5, 5))
        for i in range(3)
    ]
    assert colors[0][0] > 200 and colors[1][1] > 100 and colors[2][2] > 200


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "maker,reason",
    [
        (lambda d: _write(d / "empty.pdf", b""), "empty file"),
        (lambda d: _write(d / "text.pdf", b"just text"), "not a PDF"),
        (lambda d: _write(d / "corrupt.pdf", b"%PDF-1.4\n garbage garbage"), "corrupt"),
        (lambda d: helpers.encrypted_pdf(d / "enc.pdf"), "password"),
        (lambda d: helpers.huge_png(d / "bomb.png"), "decompression-bomb"),
        (lambda d: d / "missing.pdf", "no such file"),
    ],
)
def test_bad_documents_have_clear_reasons(tmp_path, maker, reason):
    path = maker(tmp_path)
    with pytest.raises(DocumentError, match=reason):
        open_source(str(path), None, 200_000_000)


def test_encrypted_pdf_opens_with_password(tmp_path):
    p = helpers.encrypted_pdf(tmp_path / "enc.pdf", "pw")
    assert open_source(str(p), "pw", 10**8).page_count == 1
    with pytest.raises(DocumentError, match="wrong password"):
        open_source(str(p), "nope", 10**8)


def test_truncated_jpeg_fails_at_render(tmp_path):
    p = helpers.truncated_jpeg(tmp_path / "cut.jpg")
    with pytest.raises(DocumentError, match="corrupt image"):
        open_source(str(p), None, 10**8)
        render_page(str(p), "jpeg", 0, BUDGET, None, 10**8)


def test_names_never_share_an_output_folder(tmp_path):
    """Cleaned names that collide, and a document named like another's folder, are kept apart."""
    d = tmp_path / "in"
    (d / "a").mkdir(parents=True)
    (d / "x").mkdir()
    for p in ("a.pdf", "a/b.pdf", "x#.pdf", "x_.pdf", "x/images.pdf", "X.pdf"):
        helpers.blank_pdf(d / p, 1)
    srcs = expand_inputs([d])
    names = [s.name for s in srcs]
    assert len(srcs) == 6 and len({n.casefold() for n in names}) == 6
    folders = {n.casefold() for n in names}
    for n in names:  # no output folder lies inside another document's folder
        parts = n.casefold().split("/")
        assert not any("/".join(parts[:i]) in folders for i in range(1, len(parts))), names
    by_path = {s.path.relative_to(d).as_posix(): s.name for s in srcs}
    assert by_path["a/b.pdf"] == "a/b" and by_path["a.pdf"].startswith("a-")
    assert by_path["x/images.pdf"] == "x/images"
    assert by_path["x#.pdf"] != by_path["x_.pdf"]


def test_a_name_does_not_depend_on_the_other_inputs(tmp_path):
    """A file alone, or beside another file of its name, or with the output folder holding that other
    file's document: it keeps the name that is its own, and no two files share one."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = helpers.blank_pdf(tmp_path / "a" / "report.pdf", 1)
    b = helpers.blank_pdf(tmp_path / "b" / "report.pdf", 1)
    hb = f"report-{path_hash(b)}"
    assert [s.name for s in expand_inputs([tmp_path / "a"])] == ["report"]
    assert [s.name for s in expand_inputs([tmp_path / "a", b])] == ["report", hb]  # a was "report-<hash>"
    assert [s.name for s in expand_inputs([b, tmp_path / "a"])] == [hb, "report"]  # the input order does not matter

    def outputs(held: dict[str, object]):
        return lambda name: Occupant(True, str(held[name])) if isinstance(held.get(name), Path) else held.get(name)

    # the output folder says who holds a name: b's document under "report" stays b's, a gets the hash
    held = {"report": b}
    assert [s.name for s in expand_inputs([tmp_path / "a", b], occupant=outputs(held))] == [
        f"report-{path_hash(a)}",
        "report",
    ]
    # a file whose document is under its hashed name keeps it when converted alone
    held = {"report": a, hb: b}
    assert [s.name for s in expand_inputs([b], occupant=outputs(held))] == [hb]
    assert [s.name for s in expand_inputs([tmp_path / "b"], occupant=outputs(held))] == [hb]
    # a folder of other documents (OUT/report/ holds OUT/report/x/) or a document above is taken
    held = {"report": Occupant(False)}
    assert [s.name for s in expand_inputs([a], occupant=outputs(held))] == [f"report-{path_hash(a)}"]
    (tmp_path / "c" / "report").mkdir(parents=True)
    inner = helpers.blank_pdf(tmp_path / "c" / "report" / "x.pdf", 1)
    held = {"report": a}
    assert [s.name for s in expand_inputs([tmp_path / "c"], occupant=outputs(held))] == [f"report-{path_hash(inner)}/x"]
