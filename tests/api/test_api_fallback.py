"""Pages the model engine gives up on, rescued by the lite fallback: streamed like any page, reported as such."""

from __future__ import annotations

import httpx

from ocrserve.profiles import load_profile
from tests.fakes.standin import StandIn
from tests.support.api import ApiProcess, H, page_events, parse_sse
from tests.support.helpers import text_pdf


def _check_fallback_page(events: list[tuple[str, dict]], page: int, title: str, why: str) -> list[tuple[str, dict]]:
    """The page's events after its last page_reset: lite's blocks, then page_done (fallback) with the same."""
    mine = page_events(events, page)
    kinds = [k for k, _ in mine]
    assert kinds[0] == "page_started" and kinds[-1] == "page_done", kinds
    last = len(kinds) - 1 - kinds[::-1].index("page_reset") if "page_reset" in kinds else 0
    tail = mine[last + 1 :]
    blocks = [d["block"] for k, d in tail if k == "block"]
    done = mine[-1][1]
    assert done["status"] == "fallback" and why in done["error"], done["error"]
    assert blocks and [k for k, _ in tail] == ["block"] * len(blocks) + ["page_done"]
    assert [b["html"] for b in blocks] == [b["html"] for b in done["blocks"]]
    assert [b["index"] for b in blocks] == list(range(len(blocks)))
    text = " ".join(b["text"] for b in blocks)
    assert f"{title} page {page + 1}" in text and "quick brown fox" in text  # lite read the text layer
    return mine


def test_stream_sends_the_blocks_of_a_page_rescued_by_the_fallback(
    api_fb: ApiProcess, standin: StandIn, tmp_path
) -> None:
    pdf = text_pdf(tmp_path / "memo.pdf", pages=2, title="Memo")
    standin.control(default_plan=["400"])  # the model server refuses every page at once: lite rescues them
    c = httpx.Client(base_url=api_fb.url, timeout=120, headers=H())
    with open(pdf, "rb") as f:
        r = c.post("/v1/convert", params={"stream": "true"}, files={"file": ("memo.pdf", f)})
    events = parse_sse(r.text)
    assert events[-1][0] == "done" and "error" not in [k for k, _ in events]
    done = events[-1][1]
    assert done["status"] == "fallback"
    for page in (0, 1):
        mine = _check_fallback_page(events, page, "Memo", "400")
        assert "page_reset" not in [k for k, _ in mine]  # nothing was streamed before the rescue
        doc_page = done["document"]["pages"][page]
        assert doc_page["status"] == "fallback" and doc_page["engine"] == "lite"
        streamed = [d["block"]["html"] for k, d in mine if k == "block"]
        assert [b["html"] for b in doc_page["blocks"]] == streamed

    standin.reset(default_plan=["400"])  # attempts counted afresh: refused again
    with open(pdf, "rb") as f:  # the sync answer says so in its header
        r = c.post("/v1/convert", files={"file": ("memo.pdf", f)})
    assert r.status_code == 200 and r.headers["x-ocr-status"] == "fallback"
    assert [p["status"] for p in r.json()["pages"]] == ["fallback", "fallback"]


def test_stream_drops_the_blocks_of_given_up_attempts_before_the_rescue(
    api_fb: ApiProcess, standin: StandIn, tmp_path
) -> None:
    pdf = text_pdf(tmp_path / "note.pdf", pages=1, title="Note")
    tries = load_profile("chandra-1").max_retries + 1
    # every attempt but the last streams some blocks and loops; the last is refused (HTTP 400): the engine
    # gives up on the page with nothing of the model's to keep, lite rescues it
    standin.control(default_plan=["loop"] * (tries - 1) + ["400"], chunk_chars=64)
    c = httpx.Client(base_url=api_fb.url, timeout=120, headers=H())
    with open(pdf, "rb") as f:
        r = c.post("/v1/convert", params={"stream": "true"}, files={"file": ("note.pdf", f)})
    events = parse_sse(r.text)
    assert events[-1][0] == "done" and events[-1][1]["status"] == "fallback"
    mine = _check_fallback_page(events, 0, "Note", "HTTP 400")
    kinds = [k for k, _ in mine]
    # one reset per retried attempt, one when the engine gives up: every block sent before it is void
    assert kinds.count("page_reset") == tries - 1, kinds  # the refused last attempt streamed nothing to void
    assert kinds.index("block") < kinds.index("page_reset")
