"""GET /v1/pages/{token}.png: the page images of streamed conversions (tokens come in `page_started`), and
GET /v1/figures/{token}.png: the figure crops of conversions answered at once (their Document links them).

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


@router.get("/v1/figures/{token}.png", response_class=Response)
async def figure_image(request: Request, token: str, who: str = Depends(caller)):
    """A figure crop of a conversion answered at once (/v1/convert; its Document links it), kept as the page
    images are; a job's crops stay with the job (/v1/jobs/{id}/images/{name})."""
    png = context(request).service.images.get(token, owner=who)
    if png is None:
        raise NotFound("no such figure (the figures of /v1/convert are kept for a while only; a job keeps its own)")
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})
