"""Upload names in any script are kept, and a key's jobs are limited by their bytes too (issue #29, item 15),
through a real `ocrserve api` process."""

from __future__ import annotations

import base64
from urllib.parse import quote

import httpx

from tests.fakes.standin import StandIn
from tests.support.api import KEYS, ApiProcess, H, wait_job
from tests.support.helpers import text_pdf

NAMES = ["Zürich Bericht.pdf", "报告 2024.pdf", "Отчёт (final).pdf", "a<b>|c*?.pdf", "../../x/हिंदी.pdf"]
# letters of every script kept; quotes, markup, controls and folders are not
KEPT = ["Zürich Bericht.pdf", "报告 2024.pdf", "Отчёт (final).pdf", "a_b_c_.pdf", "हिंदी.pdf"]


def test_non_ascii_upload_names_are_kept(api: ApiProcess, docs) -> None:
    data = docs["pdf1"].read_bytes()
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    for name, kept in zip(NAMES, KEPT):
        r = c.post("/v1/jobs", files={"file": (name, data, "application/pdf")})
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["id"])
        assert job["status"] == "done" and job["filename"] == kept, job
        doc = c.get(f"/v1/jobs/{job['id']}/result").json()
        assert doc["source"]["path"] == kept
        body = {"filename": name, "content_base64": base64.b64encode(data).decode()}
        assert c.post("/v1/convert", json=body).json()["source"]["path"] == kept
        # a download named after it: the name itself in filename* (RFC 6266), ASCII in filename
        r = c.post("/v1/render?format=md", json=doc)
        assert r.status_code == 200, r.text
        cd = r.headers["content-disposition"]
        stem = kept.rsplit(".", 1)[0]
        assert cd.isascii(), cd
        if not stem.isascii():
            assert f"filename*=UTF-8''{quote(stem + '.md', safe='')}" in cd, cd


def test_job_quota_counts_bytes_not_only_jobs(standin: StandIn, tmp_path) -> None:
    small = text_pdf(tmp_path / "small.pdf", pages=1, title="Small")
    big = text_pdf(tmp_path / "big.pdf", pages=12, title="Big " + "x" * 200)
    size = small.stat().st_size
    assert big.stat().st_size > 2.5 * size
    env = {
        "OCRSERVE_MODEL": "chandra-1",
        "OCRSERVE_API_KEYS": ",".join(KEYS[:2]),
        "OCRSERVE_JOB_WORKERS": "1",
        "OCRSERVE_FALLBACK": "false",
        "OCRSERVE_RENDER_WORKERS": "1",
        "OCRSERVE_PER_KEY_JOB_BYTES": str(int(size * 2.5)),  # two small uploads fit, not three
    }
    standin.control(delay_s=20)  # the jobs stay unfinished while the test submits
    api = ApiProcess(standin.url, tmp_path / "data", env).start()
    try:
        c = httpx.Client(base_url=api.url, timeout=60, headers=H(KEYS[0]))
        ids = []
        for _ in range(2):
            r = c.post("/v1/jobs", files={"file": ("small.pdf", small.read_bytes())})
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        r = c.post("/v1/jobs", files={"file": ("small.pdf", small.read_bytes())})
        assert r.status_code == 429 and r.json()["code"] == "busy" and int(r.headers["retry-after"]) >= 1, r.text
        assert "bytes" in r.json()["detail"], r.json()
        # an upload that alone is over the quota never fits: 413, not "retry later"
        r = c.post("/v1/jobs", files={"file": ("big.pdf", big.read_bytes())})
        assert r.status_code == 413 and r.json()["code"] == "too_large", r.text
        # the quota is the key's: another key still submits
        other = c.post("/v1/jobs", files={"file": ("small.pdf", small.read_bytes())}, headers=H(KEYS[1]))
        assert other.status_code == 202, other.text
        # a deleted job gives its bytes back
        assert c.delete(f"/v1/jobs/{ids[1]}").status_code == 200
        assert c.post("/v1/jobs", files={"file": ("small.pdf", small.read_bytes())}).status_code == 202
    finally:
        api.stop()
        standin.control(delay_s=0)
