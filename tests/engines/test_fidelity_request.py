"""The request the server gets, held against Chandra's own client: the same file through ocrserve's
renderer and `openai` engine, and through `chandra-ocr`'s loader and `generate_vllm`, against one
capturing server. The request bodies must be equal (model, one user turn with the image first and the
prompt byte for byte, temperature, top_p, max_tokens), the image compared by its decoded pixels (both
send PNG; ocrserve's is deflated faster, the pixels are the same). Also the retry sampling sequence on
a page that keeps looping, and one request for an answer cut off at max_tokens, as upstream makes.

Deliberate difference: ocrserve streams only when asked (`stream`), and then adds
`stream_options.include_usage`; the default request is upstream's.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from ocrserve.engines.openai import OpenAIEngine
from ocrserve.imagesize import Budget
from ocrserve.ingest.raster import forget, render_page
from ocrserve.pipeline.page import page_input
from ocrserve.profiles import load_profile
from tests.support.capture import GOOD, Capture
from tests.support.pages import PAGES, edge_pdf, scan
from tests.support.upstream import RELEASE, client

LOOP = GOOD + '<div data-bbox="10 70 500 900" data-label="Text"><p>' + "and again " * 400


@pytest.fixture
def capture():
    c = Capture()
    yield c
    c.close()


def _upstream_requests(cap: Capture, profile: str, path, pdf: bool, max_retries: int = 0) -> list[dict]:
    up = client(RELEASE[profile])
    images = up.input.load_pdf_images(str(path), []) if pdf else [up.input.load_image(str(path))]
    up.settings.settings.VLLM_API_BASE = cap.url  # 0.1.8 reads it here; 0.2.0 takes vllm_api_base
    kwargs = {"vllm_api_base": cap.url} if up.version != "0.1.8" else {}
    n = len(cap.bodies)
    out = up.vllm.generate_vllm(
        [up.schema.BatchInputItem(image=images[0], prompt_type="ocr_layout")], max_retries=max_retries, **kwargs
    )
    assert len(out) == 1
    return cap.bodies[n:]


def _our_requests(cap: Capture, profile: str, path, kind: str, max_retries: int = 0) -> list[dict]:
    prof = load_profile(profile).model_copy(update={"max_retries": max_retries})
    rp = render_page(str(path), kind, 0, Budget.from_profile(prof), None, 10**9)
    forget(str(path))
    n = len(cap.bodies)
    eng = OpenAIEngine(prof, server=cap.url)

    async def go():
        try:
            return await eng.ocr(page_input("d", rp, str(path), kind, None))
        finally:
            await eng.aclose()

    res = asyncio.run(go())
    assert res.ok, res.error
    return cap.bodies[n:]


def _pixels(url: str) -> np.ndarray:
    head, _, b64 = url.partition(",")
    assert head == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


def _same_request(ours: dict, theirs: dict) -> None:
    a, b = json.loads(json.dumps(ours)), json.loads(json.dumps(theirs))
    pa = _pixels(a["messages"][0]["content"][0]["image_url"].pop("url"))
    pb = _pixels(b["messages"][0]["content"][0]["image_url"].pop("url"))
    assert pa.shape == pb.shape and np.array_equal(pa, pb), "the image differs"
    assert a == b


@pytest.mark.parametrize("profile", ["chandra-1", "chandra-2"])
@pytest.mark.parametrize("kind", ["a4", "letter", "slide"])
def test_a_pdf_page_request_equals_upstreams(capture, tmp_path, profile, kind):
    path = edge_pdf(tmp_path / f"{kind}.pdf", PAGES[kind])
    (theirs,) = _upstream_requests(capture, profile, path, pdf=True)
    (ours,) = _our_requests(capture, profile, path, "pdf")
    _same_request(ours, theirs)
    # spelled out, so a failure says which part: the prompt byte for byte, the sampling
    text = ours["messages"][0]["content"][1]["text"]
    assert text == client(RELEASE[profile]).prompts.PROMPT_MAPPING["ocr_layout"] == load_profile(profile).prompt
    up_settings = client(RELEASE[profile]).settings.settings
    assert (ours["temperature"], ours["top_p"], ours["max_tokens"]) == (0.0, 0.1, up_settings.MAX_OUTPUT_TOKENS)


@pytest.mark.parametrize("profile", ["chandra-1", "chandra-2"])
def test_an_image_request_equals_upstreams(capture, tmp_path, profile):
    path = tmp_path / "scan.png"
    scan((1275, 1650)).save(path)
    (theirs,) = _upstream_requests(capture, profile, path, pdf=False)
    (ours,) = _our_requests(capture, profile, path, "png")
    _same_request(ours, theirs)


@pytest.mark.parametrize("profile", ["chandra-1", "chandra-2"])
def test_a_looping_page_is_retried_with_upstreams_sampling(tmp_path, profile):
    cap = Capture(LOOP, "length")
    try:
        path = tmp_path / "scan.png"
        # without noise: upstream encodes the page again for each of its 7 requests (PNG at zlib's default
        # level, 0.8 s each for the noisy page); the noisy pages' pixels are compared by the tests above
        scan((1000, 1400), noise=0).save(path)
        theirs = _upstream_requests(cap, profile, path, pdf=False, max_retries=6)
        ours = _our_requests(cap, profile, path, "png", max_retries=6)
    finally:
        cap.close()
    assert len(ours) == len(theirs) == 7
    for o, t in zip(ours, theirs):
        _same_request(o, t)  # temperature and top_p of every retry included


@pytest.mark.parametrize("profile", ["chandra-1", "chandra-2"])
def test_a_cut_off_answer_is_one_request_as_upstream(tmp_path, profile):
    cap = Capture(GOOD[:-12], "length")
    try:
        path = edge_pdf(tmp_path / "dense.pdf", PAGES["letter"])
        theirs = _upstream_requests(cap, profile, path, pdf=True, max_retries=6)
        ours = _our_requests(cap, profile, path, "pdf", max_retries=6)
    finally:
        cap.close()
    assert len(ours) == len(theirs) == 1
