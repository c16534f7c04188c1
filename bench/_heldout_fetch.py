"""The fetching half of `python -m bench.heldout` (not a script): the documents of SOURCES into a folder
outside the repository, and the table images made from public data sets (Chromium renders each table's
HTML, the ground truth, to a PNG and a PDF)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from bench._heldout_sources import TABLE_DATASETS

# ---------------------------------------------------------------- fetch


def _run(cmd: list[str], cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fetch(root: Path, sources: list[dict]) -> list[dict]:
    pkgs, docs = root / "pkgs", root / "docs"
    pkgs.mkdir(parents=True, exist_ok=True)
    out = []
    for s in sources:
        kind, ref = s["kind"], s["fetch"]
        dest = docs / kind / s.get("name", Path(ref.split(":")[-1]).name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            scheme, _, rest = ref.partition(":")
            if scheme == "url":
                import urllib.request

                urllib.request.urlretrieve(rest, dest)
            elif scheme == "apt":
                pkg, path = rest.split(":", 1)
                unpacked = pkgs / "x" / pkg
                if not unpacked.exists():
                    _run(["apt-get", "download", pkg], pkgs)
                    deb = next(pkgs.glob(f"{pkg}_*.deb"))
                    unpacked.parent.mkdir(parents=True, exist_ok=True)  # dpkg-deb -x makes only the last level
                    _run(["dpkg-deb", "-x", str(deb), str(unpacked)], pkgs)
                dest.write_bytes((unpacked / path.lstrip("/")).read_bytes())
            elif scheme == "pip":
                pkg, path = rest.split(":", 1)
                whl = next(pkgs.glob(f"{pkg}-*.whl"), None)
                if whl is None:
                    _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", pkg, "-d", str(pkgs)], pkgs)
                    whl = next(pkgs.glob(f"{pkg}-*.whl"))
                dest.write_bytes(zipfile.ZipFile(whl).read(path))
            else:
                raise SystemExit(f"source {ref!r}: use url:, apt:PACKAGE:PATH or pip:PACKAGE:PATH")
        out.append({**s, "path": str(dest)})
    out += make_tables(root, docs / "tables")
    (root / "manifest.json").write_text(json.dumps(out, indent=1))
    return out


def table_html(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows[1:])
    return f"<table><tr>{head}</tr>{body}</table>"


_STYLES = {
    "ruled": "td,th{border:1px solid #000;padding:3px 8px} table{border-collapse:collapse}",
    "plain": "td,th{padding:2px 14px;text-align:right} td:first-child,th:first-child{text-align:left}",
    "zebra": "td,th{padding:3px 10px} tr:nth-child(even){background:#e4e4e4} th{border-bottom:2px solid #000}",
    "tight": "td,th{padding:1px 5px;text-align:right;font-size:12px} table{border-collapse:collapse}",
}


def make_tables(root: Path, out: Path) -> list[dict]:
    """Tables of public data sets as HTML (the truth), a PNG screenshot and a PDF print by Chromium."""
    import csv

    out.mkdir(parents=True, exist_ok=True)
    pkgs = root / "pkgs"
    whl = next(pkgs.glob("vega_datasets-*.whl"), None)
    if whl is None:
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "vega_datasets", "-d", str(pkgs)], pkgs)
        whl = next(pkgs.glob("vega_datasets-*.whl"))
    z = zipfile.ZipFile(whl)
    made = []
    for n, (name, cols, nrows) in enumerate(TABLE_DATASETS):
        data = z.read(f"vega_datasets/_data/{name}").decode()
        if name.endswith(".csv"):
            recs = list(csv.DictReader(io.StringIO(data)))
        else:
            recs = json.loads(data)
        rows = [cols] + [[str(r.get(c, "")) for c in cols] for r in recs[:nrows]]
        style = list(_STYLES)[n % len(_STYLES)]
        stem = out / f"{Path(name).stem}-{style}"
        truth = table_html(rows)
        page = f"<html><head><style>body{{font-family:sans-serif;margin:12px}}{_STYLES[style]}</style></head><body>{truth}</body></html>"
        stem.with_suffix(".html").write_text(page)
        if not stem.with_suffix(".png").exists():
            shot = f"--screenshot={stem.with_suffix('.png')}"
            _run(
                [
                    "chromium",
                    "--headless",
                    "--no-sandbox",
                    "--hide-scrollbars",
                    shot,
                    "--window-size=900,700",
                    str(stem.with_suffix(".html")),
                ],
                out,
            )
            _run(
                [
                    "chromium",
                    "--headless",
                    "--no-sandbox",
                    f"--print-to-pdf={stem.with_suffix('.pdf')}",
                    "--no-pdf-header-footer",
                    str(stem.with_suffix(".html")),
                ],
                out,
            )
        made.append(
            {"kind": "tables", "name": stem.name, "path": str(stem), "truth": truth, "source": f"vega_datasets {name}"}
        )
    return made
