"""The viewer page at /, its static files, and the API docs at /docs.

/docs is served from the package, never from a CDN (it works offline): a small page that reads
/openapi.json and lists every operation with its parameters, request body and answers. No package
on the build machines ships Swagger UI 5 (the one swagger-ui-bundle wheel ships 4.15, which cannot
read FastAPI's OpenAPI 3.1), so the page is our own.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def viewer():
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/docs")
async def docs():
    return FileResponse(STATIC / "docs.html", media_type="text/html")
