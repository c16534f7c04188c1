"""`ocrserve convert --format txt` (the lite engine, a born-digital PDF): the plain text is written beside
the JSON, a rerun finds the document complete, and the help lists the registered formats."""

from __future__ import annotations

import json

from ocrserve.document import Document
from ocrserve.labels import HEADER_FOOTER
from ocrserve.render.markdown import PAGE_RULE
from ocrserve.render.text import render_text
from tests.cli.support import cli
from tests.support.helpers import text_pdf


def test_convert_writes_plain_text(tmp_path):
    src = text_pdf(tmp_path / "memo.pdf", pages=2, title="Memo")
    out = tmp_path / "out"
    r = cli("convert", str(src), "-o", str(out), "--engine", "lite", "--format", "txt", "--json-log")
    assert r.returncode == 0, r.stderr
    folder = out / "memo"
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["memo.json", "memo.txt"]
    txt = (folder / "memo.txt").read_text(encoding="utf-8")
    assert txt.startswith("Memo page 1\n\n") and "Memo page 2" in txt and txt.endswith("lazy dog.\n")
    assert "#" not in txt and "<" not in txt  # no Markdown, no HTML
    blocks = [b for p in json.loads((folder / "memo.json").read_text(encoding="utf-8"))["pages"] for b in p["blocks"]]
    assert txt == "\n\n".join(b["text"] for b in blocks if b["label"] not in HEADER_FOOTER) + "\n"
    r = cli(
        "convert",
        str(src),
        "-o",
        str(tmp_path / "kept"),
        "--engine",
        "lite",
        "--format",
        "txt",
        "-q",
        "--keep-headers-footers",
        "--paginate",
    )
    kept = (tmp_path / "kept" / "memo" / "memo.txt").read_text(encoding="utf-8")
    assert r.returncode == 0 and kept == render_text(
        Document.model_validate_json((tmp_path / "kept" / "memo" / "memo.json").read_text(encoding="utf-8")),
        keep_headers_footers=True,
        paginate=True,
    )
    assert f"\n\n1{PAGE_RULE}\n\n" in kept and len(kept) > len(txt)
    r = cli("convert", str(src), "-o", str(out), "--engine", "lite", "--format", "txt", "--json-log")
    done = [json.loads(ln) for ln in r.stdout.splitlines() if '"doc_done"' in ln]
    assert r.returncode == 0 and [d["status"] for d in done] == ["skipped"], r.stdout


def test_format_help_lists_the_registry():
    r = cli("convert", "--help")
    assert r.returncode == 0 and "txt (plain text)" in " ".join(r.stdout.split()), r.stdout
