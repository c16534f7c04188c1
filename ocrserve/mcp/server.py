"""The MCP server (the official SDK's MCPServer) over stdio or streamable HTTP.

Tools: `convert_document` (a path within the allowed roots, or the file's bytes; pages, format, engine,
model), `submit_job`, `job_status`, `job_result`. Resources: a finished document's Markdown and JSON,
`ocrserve://documents/{id}/markdown` and `.../json`. The work is ocrserve/mcp/documents.py's.

Over HTTP, with keys configured (OCRSERVE_API_KEYS / OCRSERVE_API_KEYS_FILE, as `ocrserve api`) every
request needs `Authorization: Bearer <key>` (else 401, before the MCP layer sees it), and each key sees
its own documents and jobs. Over stdio the client is the process that started the server: no key.
"""

import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ocrserve.api.auth import OPEN, Auth
from ocrserve.mcp.documents import LOCAL, Conversion, DocumentService, RequestError

log = logging.getLogger(__name__)

Format = Literal["md", "json", "html", "chunks", "txt"]
PathArg = Annotated[
    str | None,
    Field(
        description="a document on the server's machine (absolute, or relative to the "
        "first allowed root); give this or content_base64"
    ),
]
ContentArg = Annotated[
    str | None,
    Field(description="the document's bytes, base64-encoded (PDF, image, DOCX, XLSX, PPTX, ...); give this or path"),
]
FilenameArg = Annotated[str | None, Field(description="the uploaded file's name, e.g. report.docx")]
PagesArg = Annotated[str | None, Field(description="1-based page ranges, e.g. 1-3,7 (default: every page)")]
FormatArg = Annotated[
    Format,
    Field(
        description="md (Markdown), json (the Document: blocks with labels and boxes), "
        "html, chunks (JSON lines for retrieval) or txt"
    ),
]
EngineArg = Annotated[
    str | None,
    Field(
        description="lite (CPU: text layer + OCR), openai (the model server the MCP "
        "server was started with) or hf; default: the server's"
    ),
]
ModelArg = Annotated[str | None, Field(description="model profile: chandra-2 or chandra-1; default: the server's")]
PasswordArg = Annotated[str | None, Field(description="the password of an encrypted PDF")]
IdArg = Annotated[str, Field(description="the id a conversion or submit_job answered")]
# what a document is given by, to convert_document and submit_job: (argument, its type)
DOCUMENT = (
    ("path", PathArg),
    ("content_base64", ContentArg),
    ("filename", FilenameArg),
    ("pages", PagesArg),
    ("engine", EngineArg),
    ("model", ModelArg),
    ("password", PasswordArg),
)

INSTRUCTIONS = """ocrserve converts documents (PDF, images, DOCX/XLSX/PPTX and other Office files) into Markdown,
HTML, JSON or retrieval chunks with the Chandra OCR models (or the CPU lite engine). Use convert_document for a
short document; for a long one, submit_job, then job_status until it is done, then job_result. A finished
document's Markdown and JSON are also resources: ocrserve://documents/{id}/markdown and .../json."""

# a finished document's resources: ocrserve://documents/{id}/<part>, its format, media type and description
RESOURCES = (
    ("markdown", "md", "text/markdown", "A finished document's Markdown"),
    (
        "json",
        "json",
        "application/json",
        "A finished document's JSON (the Document: pages, blocks with labels and boxes)",
    ),
)


def takes_document(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A tool `fn(ctx, ..., **document)` as the MCP SDK reads it (its signature): the document's arguments
    (DOCUMENT: each optional, described) before the tool's own, which become keyword-only."""
    sig = inspect.signature(fn)
    own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    document = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in DOCUMENT
    ]
    first, rest = own[:1], [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[1:]]
    fn.__signature__ = sig.replace(parameters=first + document + rest)  # type: ignore[attr-defined]
    return fn


def build_server(service: DocumentService, auth: Auth | None = None) -> MCPServer:
    server = MCPServer("ocrserve", instructions=INSTRUCTIONS, version=_version())

    def owner(ctx: Context) -> str:
        headers = ctx.headers
        if auth is None or headers is None:
            return LOCAL
        if auth.open:
            return OPEN
        who = auth.identify(headers.get("authorization"))
        if who is None:  # the HTTP layer refuses such a request first
            raise ToolError("missing or invalid API key")
        return who

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    @takes_document
    async def convert_document(ctx: Context, format: FormatArg = "md", **document: Any) -> CallToolResult:
        """Convert one document and answer it in the format asked for (Markdown by default). The answer's first
        text says what was converted and the document's id (for the resources); the second is the document."""
        try:
            conv = await service.convert(owner(ctx), **document)
            return _result(conv, service.render(conv, format), format)
        except RequestError as e:
            raise ToolError(str(e)) from None

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    @takes_document
    async def submit_job(ctx: Context, **document: Any) -> dict[str, Any]:
        """Start converting a document in the background; answers its job id at once (then job_status, job_result).
        Jobs live as long as this server runs."""
        try:
            conv = await service.submit(owner(ctx), **document)
        except RequestError as e:
            raise ToolError(str(e)) from None
        return conv.public()

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def job_status(ctx: Context, job_id: IdArg) -> dict[str, Any]:
        """A job's status: queued, running, done or failed, with pages done of pages_total and its error."""
        try:
            return service.get(owner(ctx), job_id).public()
        except RequestError as e:
            raise ToolError(str(e)) from None

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def job_result(ctx: Context, job_id: IdArg, format: FormatArg = "md") -> CallToolResult:
        """A finished job's document in the format asked for (an error while it still runs, or if it failed)."""
        try:
            conv = service.get(owner(ctx), job_id)
            return _result(conv, service.render(conv, format), format)
        except RequestError as e:
            raise ToolError(str(e)) from None

    def reader(fmt: str):
        async def read(doc_id: str, ctx: Context) -> str:
            return _read(service, owner(ctx), doc_id, fmt)

        return read

    for part, fmt, mime_type, description in RESOURCES:
        server.resource(
            f"ocrserve://documents/{{doc_id}}/{part}",
            name=f"document-{part}",
            mime_type=mime_type,
            description=description,
        )(reader(fmt))
    return server


def _read(service: DocumentService, who: str, doc_id: str, fmt: str) -> str:
    try:
        return service.render(service.get(who, doc_id), fmt)
    except RequestError as e:
        raise ResourceError(str(e)) from None


def _result(conv: Conversion, body: str, fmt: str) -> CallToolResult:
    doc = conv.document
    assert doc is not None
    said = (
        f"{conv.filename} ({doc.source.type}): {conv.status}, {len(doc.pages)} page(s)"
        f"{f', {conv.pages_failed} failed' if conv.pages_failed else ''}; id {conv.id}; format {fmt}; "
        f"resources ocrserve://documents/{conv.id}/markdown and /json"
    )
    if conv.error:
        said += f"; note: {conv.error}"
    return CallToolResult(
        content=[TextContent(type="text", text=said), TextContent(type="text", text=body)],
        structured_content=conv.public(),
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ocrserve")
    except PackageNotFoundError:
        return "0"


# ------------------------------------------------------------------------------------ transports
async def serve_stdio(service: DocumentService) -> None:
    server = build_server(service)
    try:
        await server.run_stdio_async()
    finally:
        await service.aclose()


class BearerKeys:
    """ASGI middleware: an HTTP request without a valid `Authorization: Bearer <key>` is answered 401."""

    def __init__(self, app, auth: Auth) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.auth.open:
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"authorization")
        if self.auth.identify(header.decode("latin-1") if header else None) is None:
            body = (
                b'{"error": "unauthorized", "detail": "'
                + (b"invalid API key" if header else b"missing API key: send Authorization: Bearer <key>")
                + b'"}'
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        return await self.app(scope, receive, send)


async def serve_http(
    service: DocumentService, auth: Auth, host: str, port: int, path: str = "/mcp", log_level: str = "warning"
) -> None:
    import uvicorn

    server = build_server(service, auth)
    limit = service.settings.max_upload_bytes * 4 // 3 + 256 * 1024  # a base64 upload in a JSON-RPC message
    app = server.streamable_http_app(streamable_http_path=path, host=host, max_request_body_size=limit)
    try:
        await uvicorn.Server(
            uvicorn.Config(BearerKeys(app, auth), host=host, port=port, log_level=log_level, lifespan="on")
        ).serve()
    finally:
        await service.aclose()


def roots_of(allow: list[Path] | None) -> list[Path]:
    """The allowed roots: those given (each must be a folder), else the current folder."""
    roots = [Path(p).expanduser() for p in (allow or [])] or [Path.cwd()]
    for r in roots:
        if not r.is_dir():
            raise RequestError(f"--allow-root {r}: not a folder")
    return roots
