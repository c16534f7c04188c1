"""`ocrserve mcp` end to end with the official SDK's own client: over stdio (the client starts
`python -m ocrserve mcp`, with the args the README's desktop-client snippet gives) and over streamable HTTP
(a server on a free port, with keys), on the lite engine and in front of the stand-in vLLM server.
A PDF by path and a DOCX by its bytes are converted, a job is followed to its result, a finished document's
Markdown and JSON are read as resources; paths outside the allowed roots, uploads over the size limit and
documents over the page limit are refused with their reason."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest

from tests.fakes.standin import StandIn
from tests.support import office
from tests.support.helpers import stop_process, text_pdf

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCRSERVE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({"OCRSERVE_RENDER_WORKERS": "2", "OCRSERVE_LITE_WORKERS": "1", **extra})
    return env


def _readme_args() -> list[str]:
    """The args of the README's Claude Desktop snippet (`"mcpServers": {"ocrserve": {"command", "args"}}`)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(\{\s*\"mcpServers\".*?)\n```", text, re.S)
    assert block, "README: no mcpServers JSON snippet"
    entry = json.loads(block.group(1))["mcpServers"]["ocrserve"]
    assert Path(entry["command"]).name == "ocrserve" and entry["args"][0] == "mcp", entry
    return entry["args"]


def _text(result) -> list[str]:
    return [c.text for c in result.content]


async def _wait_job(session, job_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = await session.call_tool("job_status", {"job_id": job_id})
        assert not st.is_error, _text(st)
        if st.structured_content["status"] in ("done", "failed") or time.monotonic() > deadline:
            return st.structured_content
        await anyio.sleep(0.2)


async def _session_checks(session, docs: Path, outside: Path) -> None:
    """What every transport is asked: tools, a PDF by path, a DOCX by its bytes, a job, resources, refusals."""
    tools = {t.name for t in (await session.list_tools()).tools}
    assert {"convert_document", "submit_job", "job_status", "job_result"} <= tools
    templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
    assert templates == {"ocrserve://documents/{doc_id}/markdown", "ocrserve://documents/{doc_id}/json"}

    res = await session.call_tool("convert_document", {"path": "report.pdf", "pages": "2"})
    assert not res.is_error, _text(res)
    said, md = _text(res)
    assert "report.pdf (pdf): done, 1 page(s)" in said
    assert "Report page 2" in md and "Report page 1" not in md

    data = base64.b64encode((docs / "contract.docx").read_bytes()).decode()
    res = await session.call_tool(
        "convert_document", {"content_base64": data, "filename": "Vertrag Zürich.docx", "format": "json"}
    )
    assert not res.is_error, _text(res)
    doc = json.loads(_text(res)[1])
    # not the server's folder; the name's letters kept in any script, as the HTTP API keeps them
    assert doc["source"]["type"] == "docx" and doc["source"]["path"] == "Vertrag Zürich.docx"
    assert "Contract Alpha" in json.dumps(doc) and res.structured_content["type"] == "docx"

    job = await session.call_tool("submit_job", {"path": str(docs / "report.pdf")})
    assert not job.is_error, _text(job)
    job_id = job.structured_content["id"]
    assert job.structured_content["pages_total"] == 3
    st = await _wait_job(session, job_id)
    assert st["status"] == "done" and st["pages_done"] == 3, st
    res = await session.call_tool("job_result", {"job_id": job_id, "format": "md"})
    assert not res.is_error and "Report page 3" in _text(res)[1]
    md = (await session.read_resource(f"ocrserve://documents/{job_id}/markdown")).contents[0]
    assert md.mime_type == "text/markdown" and "Report page 1" in md.text
    js = (await session.read_resource(f"ocrserve://documents/{job_id}/json")).contents[0]
    assert json.loads(js.text)["source"]["page_count"] == 3

    for path in (str(outside), "../outside.pdf", "escape.pdf"):  # escape.pdf: a symlink out of the root
        res = await session.call_tool("convert_document", {"path": path})
        assert res.is_error and "outside the allowed roots" in _text(res)[0], _text(res)
    res = await session.call_tool("job_status", {"job_id": "0" * 32})
    assert res.is_error and "no document or job" in _text(res)[0]


def _docs(tmp_path: Path) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    text_pdf(docs / "report.pdf", pages=3, title="Report")
    office.docx(docs / "contract.docx")
    outside = text_pdf(tmp_path / "outside.pdf", pages=1)
    os.symlink(outside, docs / "escape.pdf")
    return docs, outside


def test_stdio_session_with_the_readme_args(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    docs, outside = _docs(tmp_path)
    args = _readme_args()
    args = [a if args[i - 1] != "--allow-root" else str(docs) for i, a in enumerate(args)]
    params = StdioServerParameters(command=sys.executable, args=["-m", "ocrserve", *args], env=_env(), cwd=str(ROOT))

    async def main():
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                await _session_checks(session, docs, outside)

    anyio.run(main)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_http(tmp_path: Path, docs: Path, *args: str, **env: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ocrserve",
            "mcp",
            "--transport",
            "http",
            "--port",
            str(port),
            "--allow-root",
            str(docs),
            *args,
        ],
        cwd=ROOT,
        env=_env(**env),
        stdout=log,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return proc, url
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_process(proc)
                raise AssertionError((tmp_path / "server.log").read_text()) from None
            time.sleep(0.2)


async def _http_session(url: str, key: str | None, checks) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (r, w),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        await checks(session)


def test_streamable_http_with_keys_and_limits(tmp_path):
    docs, outside = _docs(tmp_path)
    text_pdf(docs / "long.pdf", pages=4)
    proc, url = _start_http(
        tmp_path, docs, OCRSERVE_API_KEYS="key-1,key-2", OCRSERVE_MAX_PAGES="3", OCRSERVE_MAX_UPLOAD_BYTES="60000"
    )
    try:
        for headers in ({}, {"Authorization": "Bearer nope"}):  # refused before the MCP layer
            r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers, timeout=10)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
        seen: dict[str, str] = {}

        async def as_key_1(session):
            await _session_checks(session, docs, outside)
            res = await session.call_tool("convert_document", {"path": "long.pdf"})
            assert res.is_error and "4 pages to convert; the limit is 3" in _text(res)[0], _text(res)
            big = base64.b64encode(os.urandom(70000)).decode()
            res = await session.call_tool("convert_document", {"content_base64": big, "filename": "big.pdf"})
            assert res.is_error and "upload too large" in _text(res)[0], _text(res)
            job = await session.call_tool("submit_job", {"path": "report.pdf", "pages": "1"})
            seen["job"] = job.structured_content["id"]
            assert (await _wait_job(session, seen["job"]))["status"] == "done"

        async def as_key_2(session):  # another key does not see key-1's documents
            res = await session.call_tool("job_status", {"job_id": seen["job"]})
            assert res.is_error and "no document or job" in _text(res)[0]

        anyio.run(_http_session, url, "key-1", as_key_1)
        anyio.run(_http_session, url, "key-2", as_key_2)
    finally:
        stop_process(proc)


def test_stand_in_model_server(standin: StandIn, tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    docs, _ = _docs(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        cwd=str(ROOT),
        env=_env(OCRSERVE_MODEL="chandra-1"),
        args=["-m", "ocrserve", "mcp", "--allow-root", str(docs), "--server", standin.url],
    )

    async def main():
        async with (
            stdio_client(params, errlog=open(tmp_path / "stderr.log", "w")) as (r, w),
            ClientSession(r, w) as session,
        ):
            await session.initialize()
            res = await session.call_tool("convert_document", {"path": "report.pdf", "format": "json"})
            assert not res.is_error, _text(res)
            doc = json.loads(_text(res)[1])
            assert doc["model"] == "chandra-1" and [p["engine"] for p in doc["pages"]] == ["openai"] * 3
            res = await session.call_tool("convert_document", {"path": "report.pdf", "pages": "1"})
            assert re.search(r"^# Page [0-9a-f]{12}$", _text(res)[1], re.M), _text(res)[1]  # the stand-in's answer
            # the lite engine on the same server, by choice
            res = await session.call_tool("convert_document", {"path": "report.pdf", "pages": "1", "engine": "lite"})
            assert "Report page 1" in _text(res)[1]

    anyio.run(main)
    assert standin.stats()["completed"] >= 4
