"""/healthz (the process answers), /readyz (the engine answers), /metrics (Prometheus)."""

from __future__ import annotations

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
    svc = context(request).service
    ok = await svc.ready()
    return JSONResponse({"ready": ok, "engine": svc.engine.name}, status_code=200 if ok else 503)


@router.get("/metrics")
async def metrics(request: Request):
    return Response(generate_latest(context(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)
