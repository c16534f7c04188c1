"""/healthz (the process answers), /readyz (the engine, the job store and the job workers), /metrics (Prometheus)."""

from __future__ import annotations

import asyncio
import sqlite3

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ocrserve.api.deps import context

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request):
    """Ready when the engine answers, the job store can be read and every job worker loop runs (a loop
    waiting out a failing store is not ready: jobs would stay queued). `problems` says what is not."""
    ctx = context(request)
    svc = ctx.service
    problems: list[str] = []
    if not await svc.ready():
        problems.append(f"engine {svc.engine.name} does not answer")
    try:
        await asyncio.to_thread(ctx.store.ping)
    except sqlite3.Error as e:
        problems.append(f"job store: {type(e).__name__}: {e}")
    worker = ctx.worker.healthy()
    if worker:
        problems.append(worker)
    ok = not problems
    body = {"ready": ok, "engine": svc.engine.name, **({"problems": problems} if problems else {})}
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/metrics")
async def metrics(request: Request):
    # in a thread: the job gauges ask SQLite, which another process may hold locked for a while
    body = await asyncio.to_thread(generate_latest, context(request).metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
