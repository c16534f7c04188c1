"""The front of `--parallel epd`: each page goes to an encoder instance first, then to a decoder.

The encoder instance (`--mm-encoder-only`, EC producer) runs the vision tower on the page image and
publishes the encoder output through vLLM's EC connector; the decoder instance (EC consumer) finds
it under the same multimodal hash and skips its own vision tower. So the proxy: (1) sends the
request's image alone, `max_tokens` 1, to an encoder (round robin), (2) once that is done, forwards
the original request to a decoder (round robin) and streams its answer back unchanged.

    python -m ocrserve.vllm.epd_proxy --port 8000 --encoders http://h:8001 --decoders http://h:8002
"""

from __future__ import annotations

import argparse
import itertools
import logging

import httpx

log = logging.getLogger("ocrserve.epd_proxy")


def encoder_request(body: dict) -> dict:
    """The request's images only, one output token: what the encoder instance needs to encode them."""
    content = []
    for msg in body.get("messages", []):
        if isinstance(msg.get("content"), list):
            content += [p for p in msg["content"] if p.get("type") in ("image_url", "input_image")]
    return {
        "model": body.get("model"),
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 1,
        "stream": False,
    }


def build_app(encoders: list[str], decoders: list[str], timeout: float = 900.0):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    enc_cycle, dec_cycle = itertools.cycle(encoders), itertools.cycle(decoders)
    client = httpx.AsyncClient(timeout=timeout)

    async def health(request: Request) -> Response:
        for url in encoders + decoders:
            try:
                if (await client.get(f"{url}/health", timeout=2.0)).status_code != 200:
                    return Response(status_code=503)
            except httpx.HTTPError:
                return Response(status_code=503)
        return Response(status_code=200)

    async def models(request: Request) -> Response:
        r = await client.get(f"{decoders[0]}/v1/models")
        return Response(r.content, status_code=r.status_code, media_type="application/json")

    async def passthrough(request: Request) -> Response:
        r = await client.get(f"{decoders[0]}{request.url.path}")
        return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))

    async def chat(request: Request) -> Response:
        body = await request.json()
        enc = encoder_request(body)
        if enc["messages"][0]["content"]:
            er = await client.post(f"{next(enc_cycle)}/v1/chat/completions", json=enc)
            if er.status_code != 200:
                return JSONResponse({"error": f"encoder failed: {er.text[:500]}"}, status_code=er.status_code)
        dec = next(dec_cycle)
        req = client.build_request("POST", f"{dec}/v1/chat/completions", json=body)
        resp = await client.send(req, stream=True)
        if not body.get("stream"):
            data = await resp.aread()
            await resp.aclose()
            return Response(data, status_code=resp.status_code, media_type=resp.headers.get("content-type"))

        async def chunks():
            try:
                async for chunk in resp.aiter_raw():
                    yield chunk
            finally:
                await resp.aclose()

        return StreamingResponse(chunks(), status_code=resp.status_code, media_type=resp.headers.get("content-type"))

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/metrics", passthrough),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--encoders", required=True, help="comma-separated encoder instance URLs")
    ap.add_argument("--decoders", required=True, help="comma-separated prefill+decode instance URLs")
    a = ap.parse_args(argv)
    import uvicorn

    app = build_app(a.encoders.split(","), a.decoders.split(","))
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
