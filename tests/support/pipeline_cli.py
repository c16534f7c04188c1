"""What the convert pipeline's end-to-end tests share: the CLI as a subprocess, a folder of documents, a
document's JSON without what changes from run to run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import helpers

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ocrserve", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw
    )


def _docs(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    helpers.text_pdf(d / "report.pdf", pages=4, title="Report")
    helpers.text_pdf(d / "sub" / "report.pdf", pages=2, title="Other")  # same name, other folder
    helpers.image(d / "scan.png", size=(900, 1200), text="a scan")
    return d


def _stable(doc_json: dict) -> dict:
    """A document's JSON without what changes from run to run (timings, absolute temp paths)."""
    doc = json.loads(json.dumps(doc_json))
    doc["source"].pop("path", None)
    for p in doc["pages"]:
        p.pop("timings", None)
    return doc
