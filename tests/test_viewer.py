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
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import text_pdf
from tests.standin import StandIn, standin  # noqa: F401
from tests.test_api import KEYS, ApiProcess, api, free_port  # noqa: F401

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
    port = free_port()
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'profile'}", f"--remote-debugging-port={port}",
         "--remote-allow-origins=*", "--window-size=1400,1000", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "chromium did not start"
            time.sleep(0.1)
        cdp = CDP(pages[0]["webSocketDebuggerUrl"])
        yield cdp
        cdp.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_viewer_uploads_a_pdf_and_draws_labelled_boxes(api: ApiProcess, standin: StandIn, chromium: CDP, tmp_path) -> None:  # noqa: F811
    pdf = text_pdf(tmp_path / "quarterly.pdf", pages=2, title="Quarterly report")
    standin.control(token_delay_s=0.001, chunk_chars=16)  # a real stream, blocks arriving one by one
    cdp = chromium
    cdp.call("Page.enable")
    cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    cdp.call("Page.navigate", url=api.url + "/")
    cdp.wait("document.readyState === 'complete' && !!document.querySelector('#upload')")
    cdp.eval(f"document.querySelector('#key').value = {json.dumps(KEYS[0])}")
    root = cdp.call("DOM.getDocument")["root"]["nodeId"]
    node = cdp.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
    cdp.call("DOM.setFileInputFiles", nodeId=node, files=[str(pdf)])
    cdp.eval("document.querySelector('#go').click()")
    cdp.wait("document.body.dataset.done === '1'", timeout=90)

    status = cdp.eval("document.querySelector('#status').textContent")
    assert status.startswith("Done: 2 page(s)"), status
    pages = cdp.eval("""[...document.querySelectorAll('section.page')].map(p => ({
        page: p.dataset.page, status: p.dataset.status,
        boxes: [...p.querySelectorAll('.sheet .box')].map(b => b.dataset.label),
        blocks: [...p.querySelectorAll('.output .block')].map(b => b.dataset.label),
        header: (p.querySelector('.output .block h1') || {}).textContent,
        img: (p.querySelector('.sheet img') || {}).naturalWidth || 0,
        box0: (() => { const b = p.querySelector('.sheet .box'); const r = b.getBoundingClientRect();
                       const s = p.querySelector('.sheet').getBoundingClientRect();
                       return [r.left - s.left, r.top - s.top, r.width, r.height, s.width, s.height]; })(),
        colors: Object.fromEntries([...p.querySelectorAll('.sheet .box')].map(b => [b.dataset.label, b.style.getPropertyValue('--c')])),
    }))""")
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
        assert sorted(colors) == sorted(set(labels)) and len(set(colors.values())) == len(colors) and all(colors.values())
        # the header box sits where the model put it: [62, 40, 958, 88] of 1024 (chandra-1)
        x, y, w, h, sw, sh = p["box0"]
        assert abs(x / sw - 62 / 1024) < 0.01 and abs(y / sh - 40 / 1024) < 0.01
        assert abs(w / sw - 896 / 1024) < 0.01 and abs(h / sh - 48 / 1024) < 0.01
    assert pages[0]["header"] != pages[1]["header"]
    legend = cdp.eval("[...document.querySelectorAll('#legend span')].map(s => s.dataset.label)")
    assert sorted(legend) == ["Image", "Section-Header", "Table", "Text"]

    cdp.eval("window.scrollTo(0, 0)")
    shot = base64.b64decode(cdp.call("Page.captureScreenshot", format="png")["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
    (tmp_path / "viewer.png").write_bytes(shot)
    dest = os.environ.get("OCRSERVE_VIEWER_SCREENSHOT")
    if dest:
        Path(dest).write_bytes(shot)
