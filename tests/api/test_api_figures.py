"""Figure crops through the API (issue #29, item 7), against a real `ocrserve api` process: the stand-in's
answer has an Image block on every page, so every page has a crop."""

from __future__ import annotations

import io
import re
import zipfile

import httpx

from tests.support.api import KEYS, ApiProcess, H, parse_sse, wait_job

PNG = b"\x89PNG\r\n\x1a\n"


def _figures(doc: dict) -> list[str]:
    return [b["figure"] for p in doc["pages"] for b in p["blocks"] if b["figure"]]


def test_convert_links_its_figures(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    data = docs["pdf3"].read_bytes()
    doc = c.post("/v1/convert", files={"file": ("three.pdf", data)}).json()
    figs = _figures(doc)
    assert len(figs) == 3 and all(re.fullmatch(r"/v1/figures/[\w-]+\.png", f) for f in figs), figs
    for f in figs:
        r = c.get(f)
        assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content.startswith(PNG)
    assert c.get(figs[0], headers=H(KEYS[1])).status_code == 404  # another key's figure
    md = c.post("/v1/convert?format=md", files={"file": ("three.pdf", data)}).text
    links = re.findall(r"!\[[^\]]*\]\((/v1/figures/[^)]+)\)", md)
    assert len(links) == 3 and all(c.get(u).content.startswith(PNG) for u in links), md
    html = c.post("/v1/convert?format=html", files={"file": ("three.pdf", data)}).text
    assert len(re.findall(r'<img[^>]+src="/v1/figures/', html)) == 3
    # a stream's done event links them too
    events = parse_sse(c.post("/v1/convert?stream=true&format=md", files={"file": ("three.pdf", data)}).text)
    done = [d for k, d in events if k == "done"][0]
    assert len(re.findall(r"\]\(/v1/figures/", done["markdown"])) == 3
    assert all(c.get(f).content.startswith(PNG) for f in _figures(done["document"]))


def test_a_job_keeps_its_figures_and_its_document_folder(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    job = c.post("/v1/jobs", files={"file": ("three.pdf", docs["pdf3"].read_bytes())}).json()["id"]
    assert wait_job(c, job)["status"] == "done"
    doc = c.get(f"/v1/jobs/{job}/result").json()
    figs = _figures(doc)
    assert len(figs) == 3 and all(f.startswith(f"/v1/jobs/{job}/images/three_p") for f in figs), figs
    for f in figs:
        r = c.get(f)
        assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content.startswith(PNG)
    md = c.get(f"/v1/jobs/{job}/result?format=md").text
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md) == figs
    assert c.get(figs[0], headers=H(KEYS[1])).status_code == 404  # another key's job
    for bad in ("..%2Fresult.json", "result.json", ".hidden", "nope.png"):
        assert c.get(f"/v1/jobs/{job}/images/{bad}").status_code == 404, bad
    # the document folder as a zip, as `ocrserve convert` writes it: relative links, every crop in it
    r = c.get(f"/v1/jobs/{job}/archive")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert 'filename="three.zip"' in r.headers["content-disposition"]
    z = zipfile.ZipFile(io.BytesIO(r.content))
    names = set(z.namelist())
    assert {"three/three.md", "three/three.html", "three/three.json"} <= names, names
    rel = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", z.read("three/three.md").decode())
    assert len(rel) == 3 and all(u.startswith("images/") and f"three/{u}" in names for u in rel), (rel, names)
    assert all(z.read(f"three/{u}").startswith(PNG) for u in rel)
