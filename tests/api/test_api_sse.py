"""The OCR HTTP API's server-sent events end to end (a real `ocrserve api` process in front of the stand-in vLLM
server): page and block events in order, matching the page; a cut-off answer; a retried attempt resets the page."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.standin import StandIn, expected_output
from tests.support.api import ApiProcess, H, page_events, parse_sse

# ------------------------------------------------------------------------------------------- SSE


def test_stream_events_in_order_with_blocks_matching_the_page(api: ApiProcess, standin: StandIn, docs) -> None:
    from ocrserve import parse_output

    standin.control(token_delay_s=0.0005, chunk_chars=7)
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["pdf3"], "rb") as f:
        r = c.post("/v1/convert", params={"stream": "true", "pages": "1,3"}, files={"file": ("three.pdf", f)})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "done" and "error" not in kinds
    assert sorted({d["page"] for k, d in events if k == "page_started"}) == [0, 2]
    for page in (0, 2):
        mine = [(i, k, d) for i, (k, d) in enumerate(events) if d.get("page") == page]
        order = [k for _, k, _ in mine]
        assert order[0] == "page_started" and order[-1] == "page_done"
        assert set(order[1:-1]) == {"block"} and len(order) > 3
        started = mine[0][2]
        assert started["width"] == 612 and started["height"] == 792 and started["unit"] == "pt"
        png = c.get(started["image"])  # the page image as the engine saw it
        assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
        want = parse_output(expected_output(png.content), "chandra-1", (612, 792), index=page).blocks
        got = [d["block"] for _, k, d in mine if k == "block"]
        assert [b["label"] for b in got] == [b.label for b in want]
        assert [b["html"] for b in got] == [b.html for b in want]
        assert [b["index"] for b in got] == list(range(len(want)))
        for g, w in zip(got, want):
            assert g["bbox"] == pytest.approx(w.bbox)
        assert [b["html"] for b in mine[-1][2]["blocks"]] == [b.html for b in want]
        assert mine[-1][2]["status"] == "ok"
    done = events[-1][1]
    assert [p["index"] for p in done["document"]["pages"]] == [0, 2]
    streamed = [d["block"]["html"] for k, d in events if k == "block" and d["page"] == 2]
    assert [b["html"] for b in done["document"]["pages"][1]["blocks"]] == streamed
    # blocks were really streamed: the engine asked the stand-in for SSE
    assert standin.stats()["last"]["stream"] is True


def test_stream_with_markdown_and_an_unreachable_page_image(api: ApiProcess, docs) -> None:
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["png"], "rb") as f:
        r = c.post("/v1/convert", params={"stream": "true", "format": "md"}, files={"file": ("scan.png", f)})
    events = parse_sse(r.text)
    assert events[-1][0] == "done" and events[-1][1]["markdown"].startswith("# Page ")
    assert c.get("/v1/pages/not-a-token.png").status_code == 404


def _stream_one_page(api: ApiProcess, standin: StandIn, docs, plan: list[str]) -> tuple[list, list]:
    """one.pdf converted streaming while the stand-in answers by `plan` in 64-character chunks: all the
    events (the run ends done and ok) and the page's own."""
    standin.control(default_plan=plan, chunk_chars=64)
    c = httpx.Client(base_url=api.url, timeout=60, headers=H())
    with open(docs["pdf1"], "rb") as f:
        r = c.post("/v1/convert", params={"stream": "true"}, files={"file": ("one.pdf", f)})
    events = parse_sse(r.text)
    assert events[-1][0] == "done" and events[-1][1]["status"] == "ok"
    return events, page_events(events, 0)


def test_stream_a_cut_off_answer_is_the_pages_answer(api: ApiProcess, standin: StandIn, docs) -> None:
    events, mine = _stream_one_page(api, standin, docs, ["cutoff"])
    kinds = [k for k, _ in mine]
    assert "page_reset" not in kinds and kinds.count("block") >= 1
    page = events[-1][1]["document"]["pages"][0]
    assert page["truncated"] and page["attempts"] == 1 and page["blocks"]
    assert sum(standin.stats()["attempts"].values()) == 1


@pytest.mark.parametrize("bad", ["loop"])
def test_stream_a_retried_attempt_resets_the_page_at_once(api: ApiProcess, standin: StandIn, docs, bad: str) -> None:
    # the first attempt streams some blocks, then loops: the engine starts the
    # page over with on_delta(""); the client hears page_reset right then, and the retry's blocks from 0
    events, mine = _stream_one_page(api, standin, docs, [bad, "ok"])
    kinds = [k for k, _ in mine]
    assert kinds[0] == "page_started" and kinds[-1] == "page_done" and kinds.count("page_reset") == 1, kinds
    cut = kinds.index("page_reset")
    before = [d["block"] for k, d in mine[:cut] if k == "block"]
    after = [d["block"] for k, d in mine[cut + 1 :] if k == "block"]
    final = mine[-1][1]["blocks"]
    assert mine[-1][1]["status"] == "ok"
    assert (
        [b["html"] for b in after]
        == [b["html"] for b in final]
        == [b["html"] for b in events[-1][1]["document"]["pages"][0]["blocks"]]
    )
    assert [b["index"] for b in after] == list(range(len(final)))
    # before the reset: only the first attempt's closed blocks (a prefix of the answer), nothing of the retry
    assert 1 <= len(before) < len(final)
    assert [b["html"] for b in before] == [b["html"] for b in final[: len(before)]]
    assert [b["index"] for b in before] == list(range(len(before)))
    assert kinds[cut + 1 : -1] == ["block"] * len(final)
    assert sum(standin.stats()["attempts"].values()) == 2
