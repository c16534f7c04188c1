"""The README's API examples (curl), run as written against live `ocrserve api` processes (lite engine).

Every line of the ```sh blocks under the README's "API examples (curl)" heading runs in bash from the
repository's root, each block as one script (a block's lines share its variables, as in a terminal), with
only the README's address (http://127.0.0.1:8080) replaced by the test server's. Each command must exit 0
and print what its comment promises, so the README cannot drift from the API.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.support import sample as make_sample
from tests.support.api import ROOT, ApiProcess, parse_sse

README = ROOT / "README.md"
SECTION = "### API examples (curl)"
DOC_BASE = "http://127.0.0.1:8080"

SAMPLE_PAGES = 2  # ocrserve/samples/sample.pdf (and sample-encrypted.pdf)

# what the examples must show (a README edit that drops one fails test_examples_cover_the_api)
REQUIRED = {
    "upload field file": r"-F file=@",
    "convert, JSON": r"/v1/convert(?:'|\s|$)",
    "convert, Markdown": r"/v1/convert\?format=md",
    "convert, HTML": r"/v1/convert\?format=html",
    "pages=": r"/v1/convert\?[^'\s]*pages=",
    "streaming": r"curl -N .*stream=true",
    "base64 JSON body": r"content_base64",
    "password field": r"-F password=",
    "API key header": r"Authorization: Bearer ",
    "jobs: submit": r"/v1/jobs(?:'|\s|$)",
    "jobs: poll": r"^while curl .*/v1/jobs/\$JOB\s",
    "jobs: status": r"^curl http\S*/v1/jobs/\$JOB$",
    "jobs: result": r"/v1/jobs/\$JOB/result",
    "jobs: delete": r"-X DELETE \S+/v1/jobs/\$JOB",
    "metrics": r"/metrics",
    "healthz": r"/healthz",
    "readyz": r"/readyz",
}


def example_blocks() -> list[str]:
    """The ```sh blocks of the README's API examples section ([] when there is none)."""
    text = README.read_text(encoding="utf-8")
    if SECTION not in text:
        return []
    section = re.split(r"\n#{2,3} ", text.split(SECTION, 1)[1], maxsplit=1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def commands(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _block_id(block: str) -> str:
    first = block.lstrip().splitlines()[0].lstrip("# ")
    return re.split(r"[:(]", first, maxsplit=1)[0].strip().replace(" ", "-")[:30]


BLOCKS = example_blocks()


def run_block(block: str, base: str, work: Path) -> list[tuple[str, int, str, str]]:
    """Run a block's commands in one bash script: (command, exit code, stdout, stderr) for each."""
    assert shutil.which("curl"), "curl is not installed (apt-get install curl): the README's examples use it"
    cmds = commands(block)
    script = []
    for i, cmd in enumerate(cmds):
        assert DOC_BASE in cmd, f"README example does not use {DOC_BASE}: {cmd}"
        script.append(f"{{ {cmd.replace(DOC_BASE, base)}\n}} >{work}/{i}.out 2>{work}/{i}.err; echo $? >{work}/{i}.rc")
    (work / "block.sh").write_text("\n".join(script) + "\n", encoding="utf-8")
    subprocess.run(["bash", str(work / "block.sh")], cwd=ROOT, timeout=240, check=True)
    return [
        (
            cmd,
            int((work / f"{i}.rc").read_text()),
            (work / f"{i}.out").read_text(errors="replace"),
            (work / f"{i}.err").read_text(errors="replace"),
        )
        for i, cmd in enumerate(cmds)
    ]


def _selected(query: dict[str, list[str]]) -> list[int]:
    spec = query.get("pages", [None])[0]
    if spec is None:
        return list(range(SAMPLE_PAGES))
    assert re.fullmatch(r"\d+", spec), f"the test knows single-page pages= only: {spec}"
    return [int(spec) - 1]


def check_markdown(md: str, pages: list[int]) -> None:
    assert 0 in pages or make_sample.TITLE not in md, "pages= did not leave page 1 out"
    if 0 in pages:
        assert f"# {make_sample.TITLE}" in md
    if 1 in pages:
        assert f"## {make_sample.H_RESULTS}" in md and "| " + " | ".join(make_sample.TABLE[1]) + " |" in md


def check_document(doc: dict, pages: list[int]) -> None:
    assert doc["source"]["page_count"] == SAMPLE_PAGES
    assert [p["index"] for p in doc["pages"]] == pages and all(p["status"] == "ok" for p in doc["pages"])
    texts = " ".join(b["text"] or "" for p in doc["pages"] for b in p["blocks"])
    assert (make_sample.TITLE in texts) == (0 in pages) and (make_sample.H_RESULTS in texts) == (1 in pages)


def check_output(cmd: str, out: str, fmt: str, pages: list[int]) -> None:
    """A document as a response body (after the headers when the command has -i)."""
    if re.search(r"\s-i\s", cmd):
        head, _, out = out.replace("\r\n", "\n").partition("\n\n")
        assert head.startswith("HTTP/1.1 200") and re.search(r"^x-ocr-status: ok$", head, re.M | re.I), head
    if fmt == "md":
        check_markdown(out, pages)
    elif fmt == "html":
        assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
        assert (f"<h1>{make_sample.TITLE}</h1>" in out) == (0 in pages)
    else:
        check_document(json.loads(out), pages)


def check(cmd: str, out: str) -> None:
    """What one README command must print."""
    url = urlsplit(re.search(re.escape(DOC_BASE) + r"[^\s'\"]*", cmd).group(0))
    path, query = url.path, parse_qs(url.query)
    fmt, pages = query.get("format", ["json"])[0], _selected(query)
    if cmd.startswith(("JOB=", "while ")):  # the shell keeps the output
        assert out == ""
    elif path == "/healthz":
        assert json.loads(out) == {"status": "ok"}
    elif path == "/readyz":
        assert json.loads(out) == {"ready": True, "engine": "lite"}
    elif path == "/metrics":
        assert out and all(line.startswith("ocrserve_") for line in out.splitlines())
        assert re.search(r'^ocrserve_documents_total\{status="ok"\} [1-9]', out, re.M), out
        assert re.search(r'^ocrserve_pages_total\{status="ok"\} [1-9]', out, re.M), out
    elif path == "/v1/convert" and query.get("stream") == ["true"]:
        events = parse_sse(out)
        kinds = [k for k, _ in events]
        assert kinds[-1] == "done" and {"page_started", "block", "page_done"} <= set(kinds), kinds
        assert kinds.count("page_done") == len(pages)
        done = events[-1][1]
        assert done["status"] == "ok"
        check_document(done["document"], pages)
        if fmt == "md":
            check_markdown(done["markdown"], pages)
    elif path in ("/v1/convert", "/v1/jobs/$JOB/result"):
        check_output(cmd, out, fmt, pages)
    elif path == "/v1/jobs/$JOB" and "-X DELETE" in cmd:
        body = json.loads(out)
        assert body["deleted"] is True and re.fullmatch(r"[0-9a-f]{32}", body["id"])
    elif path == "/v1/jobs/$JOB":
        job = json.loads(out)
        assert job["status"] == "done" and job["filename"] == "sample.pdf", job
        assert job["progress"] == {"pages_done": SAMPLE_PAGES, "pages_total": SAMPLE_PAGES}
    else:
        pytest.fail(f"no check for this README command (add one to {Path(__file__).name}): {cmd}")


def assert_block(block: str, base: str, work: Path) -> None:
    for cmd, rc, out, err in run_block(block, base, work):
        assert rc == 0, f"README command exited {rc}: {cmd}\n{err[-2000:]}"
        try:
            check(cmd, out)
        except Exception as e:
            raise AssertionError(
                f"README command printed the wrong thing: {cmd}\n{e}\n--- output:\n{out[:2000]}"
            ) from e


def _start(tmp_path_factory, name: str, keys: str = "") -> ApiProcess:
    data = tmp_path_factory.mktemp(name) / "data"
    env = {"OCRSERVE_API_KEYS": keys, "OCRSERVE_RENDER_WORKERS": "1"}
    return ApiProcess(None, data, env, engine="lite").start(timeout=120)


@pytest.fixture(scope="module")
def open_api(tmp_path_factory):
    proc = _start(tmp_path_factory, "readme-open")
    yield proc
    proc.stop()


def test_examples_cover_the_api() -> None:
    assert BLOCKS, f"README.md has no ```sh blocks under {SECTION!r}"
    cmds = [c for b in BLOCKS for c in commands(b)]
    missing = [what for what, rx in REQUIRED.items() if not any(re.search(rx, c) for c in cmds)]
    assert not missing, f"the README's API examples no longer show: {missing}"
    keyed = [b for b in BLOCKS if "Authorization: Bearer" in b]
    assert len(keyed) == 1 and re.search(r"OCRSERVE_API_KEYS=\S+", keyed[0]), "one keys block, naming its keys"


@pytest.mark.parametrize(
    "block",
    [b for b in BLOCKS if "Authorization: Bearer" not in b],
    ids=[_block_id(b) for b in BLOCKS if "Authorization: Bearer" not in b],
)
def test_example_block_runs_as_written(block: str, open_api: ApiProcess, tmp_path: Path) -> None:
    assert_block(block, open_api.url, tmp_path)


def test_keys_example_runs_against_a_keyed_api(tmp_path_factory, tmp_path: Path) -> None:
    keyed = [b for b in BLOCKS if "Authorization: Bearer" in b]
    assert keyed, "the README's API examples have no block with an API key"
    block = keyed[0]
    keys = re.search(r"OCRSERVE_API_KEYS=(\S+)", block).group(1)
    api = _start(tmp_path_factory, "readme-keyed", keys)
    try:
        assert_block(block, api.url, tmp_path)
        sample = (ROOT / "ocrserve" / "samples" / "sample.pdf").read_bytes()
        for headers in ({}, {"Authorization": "Bearer not-a-key"}):  # what the comment says: the key matters
            r = httpx.post(api.url + "/v1/convert", files={"file": ("sample.pdf", sample)}, headers=headers, timeout=60)
            assert r.status_code == 401, (headers, r.status_code, r.text)
        for path in ("/healthz", "/readyz", "/metrics"):  # "no key needed", as the operations block says
            assert httpx.get(api.url + path, timeout=30).status_code == 200, path
    finally:
        api.stop()
