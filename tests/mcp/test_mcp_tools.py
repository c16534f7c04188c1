"""The MCP tools as a client sees them, in-process: the arguments a document is given by (the same for
convert_document and submit_job, each described and optional), and what reaches the document service."""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import Context

from ocrserve.mcp.server import build_server

DOCUMENT = ["path", "content_base64", "filename", "pages", "engine", "model", "password"]


class _Service:
    """Records what the tools ask; answers nothing a tool needs (so the call ends in an error)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, dict]] = []

    async def convert(self, who: str, **document):
        self.asked.append(("convert", who, document))
        raise RuntimeError("recorded")

    async def submit(self, who: str, **document):
        self.asked.append(("submit", who, document))
        raise RuntimeError("recorded")


class _Stdio(Context):
    @property
    def headers(self) -> None:  # as over stdio: the caller is the local client
        return None


def _schemas(server) -> dict[str, dict]:
    return {t.name: t.input_schema for t in asyncio.run(server.list_tools())}


def test_convert_and_submit_take_a_document_by_the_same_arguments():
    tools = _schemas(build_server(_Service()))  # type: ignore[arg-type]
    convert, submit = tools["convert_document"]["properties"], tools["submit_job"]["properties"]
    assert set(convert) == {*DOCUMENT, "format"} and set(submit) == set(DOCUMENT)
    assert {k: v for k, v in convert.items() if k != "format"} == submit
    for name in DOCUMENT:
        assert submit[name]["default"] is None and submit[name]["description"], name
    assert convert["format"]["default"] == "md" and convert["format"]["enum"] == ["md", "json", "html", "chunks", "txt"]
    assert not tools["convert_document"].get("required") and not tools["submit_job"].get("required")


def test_the_document_arguments_reach_the_service():
    service = _Service()
    server = build_server(service)  # type: ignore[arg-type]
    given = {"path": "a.pdf", "pages": "1-2", "engine": "lite", "password": "pw"}
    for tool in ("convert_document", "submit_job"):
        args = {**given, **({"format": "json"} if tool == "convert_document" else {})}
        try:
            asyncio.run(server.call_tool(tool, args, context=_Stdio()))
        except Exception as e:  # the recording service answers nothing
            assert "recorded" in str(e.__cause__ or e), e
    want = {**dict.fromkeys(DOCUMENT), **given}
    assert service.asked == [("convert", "local", want), ("submit", "local", want)]
