"""The viewer in headless Chromium (Debian's chromium), driven over the DevTools protocol.

Upload a PDF through the page's form, wait for the SSE stream to finish, check the layout boxes drawn
over each page image (labels as the stand-in wrote them) and the rendered blocks beside them, and take
a screenshot (written to $OCRSERVE_VIEWER_SCREENSHOT when set, e.g. docs/viewer.png).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess
from tests.support.helpers import start_chromium, stop_process, text_pdf

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class CDP:
    """A minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)

    def call(self, method: str, **params):
        mid = next(self.ids)
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr: str):
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expr}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait(self, expr: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expr}")

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def chromium(tmp_path):
    assert CHROMIUM, "chromium is not installed: apt-get install -y chromium"
    proc, ws_url = start_chromium(CHROMIUM, tmp_path / "profile", "1400,1000", timeout=30)
    try:
        cdp = CDP(ws_url)
        yield cdp
        cdp.close()
    finally:
        stop_process(proc)


def _upload(cdp: CDP, url: str, pdf: Path, key: str | None = None) -> None:
    """Open the viewer at url, upload pdf through its form, wait for the stream to finish."""
    cdp.call("Page.enable")
    cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    cdp.call("Page.navigate", url=url + "/")
    cdp.wait("document.readyState === 'complete' && !!document.querySelector('#upload')")
    cdp.eval(f"document.querySelector('#key').value = {json.dumps(key or '')}")
    root = cdp.call("DOM.getDocument")["root"]["nodeId"]
    node = cdp.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
    cdp.call("DOM.setFileInputFiles", nodeId=node, files=[str(pdf)])
    cdp.eval("document.querySelector('#go').click()")
    cdp.wait("document.body.dataset.done === '1'", timeout=90)


_PAGES_JS = """[...document.querySelectorAll('section.page')].map(p => ({
    page: p.dataset.page, status: p.dataset.status,
    boxes: [...p.querySelectorAll('.sheet .box')].map(b => b.dataset.label),
    blocks: [...p.querySelectorAll('.output .block')].map(b => b.dataset.label),
    header: (p.querySelector('.output .block h1') || {}).textContent,
    img: (p.querySelector('.sheet img') || {}).naturalWidth || 0,
    imgH: (p.querySelector('.sheet img') || {}).naturalHeight || 0,
    box0: (() => { const b = p.querySelector('.sheet .box'); const r = b.getBoundingClientRect();
                   const s = p.querySelector('.sheet').getBoundingClientRect();
                   return [r.left - s.left, r.top - s.top, r.width, r.height, s.width, s.height]; })(),
    colors: Object.fromEntries([...p.querySelectorAll('.sheet .box')].map(b => [b.dataset.label, b.style.getPropertyValue('--c')])),
    broken: [...p.querySelectorAll('.output img')].filter(i => !i.complete || !i.naturalWidth).length,
    crops: [...p.querySelectorAll('.output .block figure.crop')].map(f => ({
        label: f.closest('.block').dataset.label, drawn: f.classList.contains('drawn'),
        w: f.querySelector('canvas').width, h: f.querySelector('canvas').height,
        caption: f.querySelector('figcaption').textContent,
        shown: f.querySelector('canvas').getBoundingClientRect().width,
        box: (s => [parseFloat(s.width) / 100, parseFloat(s.height) / 100])(
            p.querySelector(`.sheet .box[data-index="${f.closest('.block').dataset.index}"]`).style) })),
}))"""


def _screenshot(cdp: CDP, path: Path, height: int = 1000) -> bytes:
    if height != 1000:  # a taller window, same layout (the width decides it)
        cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=height, deviceScaleFactor=1, mobile=False)
    cdp.eval("window.scrollTo(0, 0)")
    shot = base64.b64decode(cdp.call("Page.captureScreenshot", format="png")["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
    path.write_bytes(shot)
    return shot


def test_viewer_uploads_a_pdf_and_draws_labelled_boxes(
    api: ApiProcess, standin: StandIn, chromium: CDP, tmp_path
) -> None:
    pdf = text_pdf(tmp_path / "quarterly.pdf", pages=2, title="Quarterly report")
    standin.control(token_delay_s=0.001, chunk_chars=16)  # a real stream, blocks arriving one by one
    cdp = chromium
    _upload(cdp, api.url, pdf, KEYS[0])

    status = cdp.eval("document.querySelector('#status').textContent")
    assert status.startswith("Done: 2 page(s)"), status
    pages = cdp.eval(_PAGES_JS)
    assert [p["page"] for p in pages] == ["0", "1"]
    for p in pages:
        assert p["status"] == "ok"
        labels = p["boxes"]
        assert labels[0] == "Section-Header" and labels[-2:] == ["Text", "Image"] and "Table" in labels, labels
        assert set(labels) <= {"Section-Header", "Text", "Table", "Image"}
        assert p["blocks"] == labels  # every box has its rendered block beside the image
        assert p["header"].startswith("Page ")
        assert p["img"] > 1000  # the page image the engine saw (1632 px wide)
        colors = p["colors"]  # coloured by label: one colour each, all different
        assert (
            sorted(colors) == sorted(set(labels)) and len(set(colors.values())) == len(colors) and all(colors.values())
        )
        # the header box sits where the model put it: [62, 40, 958, 88] of 1024 (chandra-1)
        x, y, w, h, sw, sh = p["box0"]
        assert abs(x / sw - 62 / 1024) < 0.01 and abs(y / sh - 40 / 1024) < 0.01
        assert abs(w / sw - 896 / 1024) < 0.01 and abs(h / sh - 48 / 1024) < 0.01
        # the Image block: no broken <img>, but the page image's crop under its box, captioned with the alt text
        assert p["broken"] == 0
        [crop] = p["crops"]
        assert crop["label"] == "Image" and crop["drawn"] and crop["shown"] > 50
        assert crop["caption"] == f"Bar chart of revenue by quarter for page {p['header'][5:]}"
        bw, bh = crop["box"]  # the crop is the page image under the Image block's box
        assert 0.05 < bw < 1 and 0.05 < bh < 1
        assert abs(crop["w"] - p["img"] * bw) <= 2 and abs(crop["h"] - p["imgH"] * bh) <= 2
    assert pages[0]["header"] != pages[1]["header"]
    legend = cdp.eval("[...document.querySelectorAll('#legend span')].map(s => s.dataset.label)")
    assert sorted(legend) == ["Image", "Section-Header", "Table", "Text"]
    _screenshot(cdp, Path(os.environ.get("OCRSERVE_VIEWER_SCREENSHOT_STANDIN") or tmp_path / "viewer.png"))

    # no page image to crop from (the service keeps none): a labelled placeholder with the description
    started = {"page": 9, "width": 612, "height": 792, "unit": "pt", "image": None}
    block = {"index": 0, "label": "Figure", "bbox_norm": [0.1, 0.2, 0.6, 0.5], "html": '<img alt="A flow diagram">'}
    for kind, data in (("page_started", started), ("block", {"page": 9, "block": block})):
        raw = f"event: {kind}\ndata: {json.dumps(data)}"
        cdp.eval(f"dispatch({json.dumps(raw)})")
    ph = cdp.eval("""(() => { const f = document.querySelector('section.page[data-page="9"] .output figure.crop');
        return { drawn: f.classList.contains('drawn'), caption: f.querySelector('figcaption').textContent,
                 height: f.getBoundingClientRect().height, imgs: f.closest('.block').querySelectorAll('img').length }; })()""")
    assert ph == {"drawn": False, "caption": "A flow diagram", "height": ph["height"], "imgs": 0} and ph["height"] > 40


@pytest.fixture
def lite_api(tmp_path):
    """`ocrserve api --engine lite` (no model server): the text layer of born-digital PDFs, real boxes."""
    proc = ApiProcess(None, tmp_path / "data", {"OCRSERVE_RENDER_WORKERS": "2"}, engine="lite").start()
    yield proc
    proc.stop()


# ink (dark pixels) under each box of a page, read from the page image in a canvas
_INK_JS = """(() => { const p = document.querySelector('section.page[data-page="%d"]');
    const img = p.querySelector('.sheet img'); const W = img.naturalWidth, H = img.naturalHeight;
    const c = document.createElement('canvas'); c.width = W; c.height = H;
    const g = c.getContext('2d'); g.drawImage(img, 0, 0); const px = g.getImageData(0, 0, W, H).data;
    const ink = (x0, y0, x1, y1) => { let n = 0, t = 0;
        for (let y = Math.floor(y0 * H); y < Math.ceil(y1 * H); y += 2)
            for (let x = Math.floor(x0 * W); x < Math.ceil(x1 * W); x += 2) {
                const i = 4 * (y * W + x); t++; if (px[i] + px[i + 1] + px[i + 2] < 384) n++; }
        return t ? n / t : 0; };
    const sheet = p.querySelector('.sheet').getBoundingClientRect();
    return [...p.querySelectorAll('.sheet .box')].map(b => { const r = b.getBoundingClientRect();
        const box = [(r.left - sheet.left) / sheet.width, (r.top - sheet.top) / sheet.height,
                     (r.right - sheet.left) / sheet.width, (r.bottom - sheet.top) / sheet.height];
        const [x0, y0, x1, y1] = box, dy = y1 - y0;
        return { label: b.dataset.label, box, ink: ink(...box),
                 above: ink(x0, Math.max(0, y0 - dy), x1, y0), below: ink(x0, y1, x1, Math.min(1, y1 + dy)) }; });
})()"""


def test_viewer_with_the_lite_engine_boxes_line_up_with_the_page_text(lite_api: ApiProcess, chromium: CDP) -> None:
    sample = Path(__file__).resolve().parents[2] / "ocrserve" / "samples" / "sample.pdf"
    cdp = chromium
    _upload(cdp, lite_api.url, sample)
    status = cdp.eval("document.querySelector('#status').textContent")
    assert status.startswith("Done: 2 page(s), status ok"), status
    pages = cdp.eval(_PAGES_JS)
    assert [p["page"] for p in pages] == ["0", "1"] and all(p["status"] == "ok" for p in pages)
    assert {"Section-Header", "Text", "Page-Header", "Page-Footer"} <= set(pages[0]["boxes"])
    assert {"Table", "List-Group"} <= set(pages[1]["boxes"])
    for p in pages:
        assert p["blocks"] == p["boxes"] and p["broken"] == 0
    heads = cdp.eval("[...document.querySelectorAll('.output .block h1, .output .block h2')].map(h => h.textContent)")
    assert heads[:2] == ["Field Notes on River Deltas", "Measurement Methods"] and "Next Steps" in heads
    for page in (0, 1):
        boxes = cdp.eval(_INK_JS % page)
        texts = [b for b in boxes if b["label"] != "Page-Footer"]
        assert any(b["box"][0] > 0.5 for b in texts) and any(b["box"][2] < 0.5 for b in texts)  # two columns
        for b in boxes:  # each box covers printed text, and is denser than the strip of page above or below it
            assert b["ink"] > 0.02 and b["ink"] > min(b["above"], b["below"]), b
    # page 1 whole and the top of page 2 (its table and list): docs/viewer.png with OCRSERVE_VIEWER_SCREENSHOT
    shot = _screenshot(cdp, Path(os.environ.get("OCRSERVE_VIEWER_SCREENSHOT") or "/dev/null"), height=1560)
    assert len(shot) > 50_000


def test_api_docs_render_offline_from_the_package(api: ApiProcess, chromium: CDP) -> None:
    cdp = chromium
    cdp.call("Page.enable")
    cdp.call("Page.navigate", url=api.url + "/docs")
    n = int(cdp.wait("document.body && document.body.dataset.ready"))
    ops = cdp.eval("[...document.querySelectorAll('section.op h3')].map(h => h.textContent)")
    assert n == len(ops) >= 8 and "post/v1/convert" in ops and "get/v1/jobs/{job_id}/result" in ops, ops
    convert = cdp.eval("""[...document.querySelectorAll('section.op')].find(s =>
        s.querySelector('h3').textContent === 'post/v1/convert').textContent""")
    assert "multipart/form-data" in convert and "password" in convert and "X-OCR-Status" in convert
    loaded = cdp.eval("performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(u.startswith(api.url + "/") for u in loaded), loaded  # nothing from a CDN


def _wait_file(folder: Path, name: str, timeout: float = 30) -> Path:
    """A file Chromium finished downloading into folder (no .crdownload left)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = folder / name
        if path.is_file() and not any(folder.glob("*.crdownload")) and path.stat().st_size > 0:
            return path
        time.sleep(0.1)
    raise AssertionError(f"{name} was not downloaded: {sorted(p.name for p in folder.iterdir())}")


def test_viewer_downloads_every_format(api: ApiProcess, standin: StandIn, chromium: CDP, tmp_path) -> None:
    """After a conversion the viewer offers a button per format the API renders (GET /v1/formats); each saves
    the converted Document in that format, made by POST /v1/render with the key (the searchable PDF from the
    uploaded file too): the files equal what the renderers make of the Document the stream delivered."""
    import pypdfium2

    from ocrserve.document import Document
    from ocrserve.export.formats import format_names, get_format, render_format

    pdf = text_pdf(tmp_path / "quarterly.pdf", pages=2, title="Quarterly report")
    saved = tmp_path / "downloads"
    saved.mkdir()
    cdp = chromium
    cdp.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(saved))
    _upload(cdp, api.url, pdf, KEYS[0])
    buttons = cdp.eval("[...document.querySelectorAll('#downloads button')].map(b => b.dataset.format)")
    assert buttons == list(format_names()) and {"md", "html", "json", "pdf", "chunks"} <= set(buttons), buttons
    assert cdp.eval("document.querySelector('#downloads').hidden") is False
    doc = Document.model_validate(cdp.eval("state.doc"))  # the Document the stream's done event delivered
    for name in buttons:
        cdp.eval(f"document.querySelector('#downloads button[data-format={name}]').click()")
        cdp.wait(f"document.querySelector('#downloads button[data-format={name}]').dataset.saved", timeout=60)
        fname = "quarterly" + get_format(name).suffix
        assert cdp.eval(f"document.querySelector('#downloads button[data-format={name}]').dataset.saved") == fname
        data = _wait_file(saved, fname).read_bytes()
        if name == "pdf":  # the uploaded PDF, its own text layer kept (the stand-in's text is not laid over it)
            with pypdfium2.PdfDocument(data) as out:
                assert len(out) == 2
            continue
        want = render_format(doc, name)[0]
        assert data == want or (name == "json" and data == want + b"\n"), name  # the API ends JSON with a newline
        (saved / fname).unlink()
    md = render_format(doc, "md")[0].decode()
    assert md.count("# Page ") == 2 and json.loads(render_format(doc, "json")[0])["source"]["path"] == "quarterly.pdf"
    assert not cdp.eval("document.querySelector('#status').classList.contains('error')")
    _screenshot(cdp, Path(os.environ.get("OCRSERVE_VIEWER_SCREENSHOT_DOWNLOADS") or tmp_path / "downloads.png"))
