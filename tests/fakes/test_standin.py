"""The stand-in vLLM server itself: protocol, validation, cues (plain httpx, no engine)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json

import httpx
import pytest
from PIL import Image

from ocrserve.parse import is_repetition_loop, parse_output
from tests.fakes.standin import StandInConfig, chandra_output, expected_output, make_answer


def png(i: int, size=(64, 64)) -> bytes:
    im = Image.new("RGB", size, (i % 256, 100, 200))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def body(image: bytes, *, mime="image/png", prompt="read", **extra) -> dict:
    url = f"data:{mime};base64," + base64.b64encode(image).decode()
    return {
        "model": "chandra",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": prompt}],
            }
        ],
        **extra,
    }


def post(s, payload, **kw) -> httpx.Response:
    return httpx.post(s.url + "/chat/completions", json=payload, timeout=30, **kw)


def sse_events(s, payload) -> list[dict | str]:
    out: list[dict | str] = []
    with httpx.stream("POST", s.url + "/chat/completions", json=payload, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_health_models_metrics(standin):
    assert httpx.get(standin.root + "/health").status_code == 200
    models = httpx.get(standin.url + "/models").json()
    assert models["data"][0]["id"] == "chandra" and models["data"][0]["max_model_len"] == 16384
    text = standin.metrics()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc"):
        assert f"# TYPE {name} gauge" in text
        assert f'{name}{{model_name="chandra"}} 0.0' in text


def test_json_answer_usage_and_stats(standin):
    img = png(1, (96, 128))
    r = post(standin, body(img, prompt="the prompt", temperature=0.0, top_p=0.1, max_tokens=1000))
    assert r.status_code == 200
    data = r.json()
    ch = data["choices"][0]
    assert ch["message"]["role"] == "assistant" and ch["finish_reason"] == "stop"
    assert ch["message"]["content"] == expected_output(img)
    assert data["usage"]["prompt_tokens"] == 3 * 4 + 400
    assert data["usage"]["completion_tokens"] == -(-len(ch["message"]["content"]) // 4)
    st = standin.stats()
    digest = hashlib.sha256(img).hexdigest()
    assert st["total_requests"] == 1 and st["attempts"] == {digest: 1}
    assert st["last"]["prompt"] == "the prompt" and st["last"]["sampling"]["top_p"] == 0.1


def test_answer_is_realistic_chandra_layout():
    digest = hashlib.sha256(b"x").hexdigest()
    raw = chandra_output(digest, 800, 1000)
    page = parse_output(raw, "chandra-1", (800, 1000), unit="px")
    labels = [b.label for b in page.blocks]
    assert labels[0] == "Section-Header" and f"Page {digest[:12]}" in page.blocks[0].html
    assert {"Text", "Table", "Image"} <= set(labels)
    assert "<math>" in raw and 'type="checkbox"' in raw
    assert chandra_output(hashlib.sha256(b"y").hexdigest(), 800, 1000) != raw


def test_stream_protocol(standin):
    img = png(2)
    events = sse_events(standin, body(img, stream=True, stream_options={"include_usage": True}, max_tokens=2000))
    assert events[-1] == "[DONE]"
    first, *middle, fin, usage, _ = events
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert first["object"] == "chat.completion.chunk"
    pieces = [e["choices"][0]["delta"]["content"] for e in middle]
    assert len(pieces) > 50 and max(len(p) for p in pieces) <= 4
    assert "".join(pieces) == expected_output(img)
    assert fin["choices"][0]["finish_reason"] == "stop" and fin["choices"][0]["delta"] == {}
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == 4 + 400
    # without include_usage: no usage chunk
    events = sse_events(standin, body(png(3), stream=True))
    assert not any(isinstance(e, dict) and e.get("usage") for e in events)


@pytest.mark.parametrize(
    "mutate, status, needle",
    [
        (lambda b: b["messages"].insert(0, {"role": "system", "content": "x"}), 400, "exactly one message"),
        (lambda b: b["messages"][0]["content"].reverse(), 400, "first content part"),
        (lambda b: b["messages"][0]["content"].pop(), 400, "[image_url, text]"),
        (lambda b: b["messages"][0]["content"][0]["image_url"].update(url="http://x/a.png"), 400, "data:image"),
        (lambda b: b["messages"][0]["content"][0]["image_url"].update(url="data:image/png;base64,@@@"), 400, "base64"),
        (
            lambda b: b["messages"][0]["content"][0]["image_url"].update(
                url="data:image/png;base64," + base64.b64encode(b"not an image").decode()
            ),
            400,
            "cannot identify",
        ),
        (lambda b: b["messages"][0]["content"][1].update(text=""), 400, "non-empty text"),
        (lambda b: b.update(model="other"), 404, "does not exist"),
        (lambda b: b.update(max_tokens=16384), 400, "is too large: 16384"),
    ],
)
def test_request_validation(standin, mutate, status, needle):
    b = body(png(4))
    mutate(b)
    r = post(standin, b)
    assert r.status_code == status
    err = r.json()["error"]
    assert needle in err["message"] and err["code"] == status


def test_jpeg_accepted(standin):
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, format="JPEG")
    r = post(standin, body(buf.getvalue(), mime="image/jpeg"))
    assert r.status_code == 200 and standin.stats()["last"]["image_mime"] == "image/jpeg"


def test_plans_per_image_then_ok(standin):
    a, b = png(5), png(6)
    ha = hashlib.sha256(a).hexdigest()
    standin.control(plans={ha[:10]: ["500", "429"]}, default_plan=["503"], retry_after="2")
    r1, r2, r3 = post(standin, body(a)), post(standin, body(a)), post(standin, body(a))
    assert (r1.status_code, r2.status_code, r3.status_code) == (500, 429, 200)
    assert r2.headers["retry-after"] == "2"
    assert post(standin, body(b)).status_code == 503
    assert post(standin, body(b)).status_code == 200
    st = standin.stats()
    assert st["attempts"][ha] == 3 and st["attempts"][hashlib.sha256(b).hexdigest()] == 2
    assert [e["step"] for e in st["log"]] == ["500", "429", "ok", "503", "ok"]


def test_drop_closes_connection_mid_response(standin):
    standin.control(default_plan=["drop", "drop"])
    with pytest.raises(httpx.RemoteProtocolError):
        post(standin, body(png(7)))
    with pytest.raises(httpx.RemoteProtocolError):
        sse_events(standin, body(png(7), stream=True))


def test_loop_cutoff_garbage_answers(standin):
    standin.control(default_plan=["loop"])
    r = post(standin, body(png(8), max_tokens=500)).json()
    assert r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 500
    assert is_repetition_loop(r["choices"][0]["message"]["content"])
    standin.control(default_plan=["cutoff"])
    r = post(standin, body(png(9))).json()
    content = r["choices"][0]["message"]["content"]
    assert r["choices"][0]["finish_reason"] == "length" and not content.endswith("</div>")
    assert not is_repetition_loop(content)
    standin.control(default_plan=["garbage"])
    r = post(standin, body(png(10))).json()
    assert "data-label" not in r["choices"][0]["message"]["content"]


def test_max_tokens_and_ignore_eos(standin):
    r = post(standin, body(png(11), max_tokens=20)).json()
    assert r["choices"][0]["finish_reason"] == "length" and len(r["choices"][0]["message"]["content"]) == 80
    r = post(standin, body(png(12), max_tokens=3000, ignore_eos=True)).json()
    content = r["choices"][0]["message"]["content"]
    assert len(content) == 12000 and r["usage"]["completion_tokens"] == 3000
    assert r["choices"][0]["finish_reason"] == "length" and not is_repetition_loop(content)


def test_max_concurrency_queues_and_metrics_show_it(standin):
    standin.control(max_concurrency=2, delay_s=0.5)

    async def go():
        async with httpx.AsyncClient(timeout=30) as c:
            reqs = [c.post(standin.url + "/chat/completions", json=body(png(20 + i))) for i in range(5)]
            tasks = [asyncio.ensure_future(r) for r in reqs]
            metrics = ""
            for _ in range(100):  # until the server has taken all five
                await asyncio.sleep(0.05)
                metrics = (await c.get(standin.root + "/metrics")).text
                if 'vllm:num_requests_waiting{model_name="chandra"} 3.0' in metrics:
                    break
            return await asyncio.gather(*tasks), metrics

    responses, metrics = asyncio.run(go())
    assert all(r.status_code == 200 for r in responses)
    assert 'vllm:num_requests_running{model_name="chandra"} 2.0' in metrics
    assert 'vllm:num_requests_waiting{model_name="chandra"} 3.0' in metrics
    st = standin.stats()
    assert st["max_running"] == 2 and st["max_in_flight"] == 5


def test_control_validates_and_resets(standin):
    with pytest.raises(RuntimeError, match="unknown plan step"):
        standin.control(default_plan=["explode"])
    with pytest.raises(RuntimeError, match="bad control"):
        standin.control(no_such_knob=1)
    standin.control(delay_s=0.01)
    post(standin, body(png(30)))
    assert standin.stats()["total_requests"] == 1
    cfg = standin.reset()
    assert cfg["delay_s"] == 0.0 and standin.stats()["total_requests"] == 0
    with pytest.raises(ValueError):
        StandInConfig(default_plan=["slow:x"])


def test_api_key_enforced(standin):
    standin.control(api_key="k1")
    assert post(standin, body(png(31))).status_code == 401
    assert post(standin, body(png(31)), headers={"Authorization": "Bearer k1"}).status_code == 200
    assert httpx.get(standin.url + "/models").status_code == 401


def test_make_answer_is_deterministic():
    digest = hashlib.sha256(b"z").hexdigest()
    assert make_answer("ok", digest, 10, 10, 10_000, False) == make_answer("ok", digest, 10, 10, 10_000, False)
    text, finish = make_answer("ok", digest, 10, 10, 10_000, False)
    assert finish == "stop" and text == chandra_output(digest, 10, 10)


def test_hold_until_in_flight(standin):
    standin.control(hold_until_in_flight=3, hold_timeout_s=10)

    async def go():
        async with httpx.AsyncClient(timeout=30) as c:
            first = asyncio.ensure_future(c.post(standin.url + "/chat/completions", json=body(png(40))))
            await asyncio.sleep(0.3)
            held = not first.done()
            rest = [c.post(standin.url + "/chat/completions", json=body(png(41 + i))) for i in range(2)]
            return held, await asyncio.gather(first, *rest)

    held, responses = asyncio.run(go())
    assert held and all(r.status_code == 200 for r in responses)
    assert standin.stats()["max_in_flight"] == 3
