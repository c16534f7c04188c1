"""GET /v1/pages/{token}.png: the page images of streamed conversions (tokens come in `page_started`).

With API keys configured an image is only for the key that converted the page (send it as with every
request: `Authorization: Bearer <key>`); another key, or none, gets 401/404 as for a job.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from ocrserve.api.deps import caller, context
from ocrserve.api.errors import NotFound

router = APIRouter(tags=["viewer"])


@router.get("/v1/pages/{token}.png", response_class=Response)
async def page_image(request: Request, token: str, who: str = Depends(caller)):
    png = context(request).service.images.get(token, owner=who)
    if png is None:
        raise NotFound("no such page image (they are kept for a while only)")
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})
