"""A held-out measurement of the lite engine (issue #30) beside pymupdf4llm, on public documents it was
never tuned on.

    python -m bench.heldout fetch [--dir /work/heldout] [--sources FILE]
    python -m bench.heldout score [--dir /work/heldout] [--out bench/results/heldout-lite] [--only KIND,...]

`fetch` gets the documents listed in SOURCES (or a JSON-lines FILE of the same records) into DIR
(outside the repository): `url:` entries by HTTP, `apt:PACKAGE:PATH` entries from a Debian package
(apt-get download, unpacked), `pip:PACKAGE:PATH` from a PyPI wheel (pip download). Table images are
made there from public data sets (the vega_datasets wheel): each table written as HTML, shown by
Chromium and saved as a PNG and a PDF; the HTML is the ground truth.

`score` (pymupdf4llm, apted / table-recognition-metric installed for the measurement only) writes
OUT/results.json and OUT/results.md:
- rtl: word F1 (bags of words, NFKC, punctuation and bidi controls stripped) against the better of two
  readings of the page's text layer, pdftotext's and PyMuPDF's (`lite_pdftotext`: against pdftotext's
  alone, the measure before; pdftotext cuts fully vocalised words apart at their marks);
- headings: recall / precision of Markdown headings against the PDF's outline (bookmarks) entries
  on the scored pages (a heading matches an entry at a similarity >= 0.8, numbering ignored);
- columns: two-column pages rasterised at 150 dpi with noise and a 0.5 degree skew: word order
  (normalised Levenshtein similarity of the word sequences) and word F1 against pdftotext's text;
- tables: TEDS of each table against its HTML (images: lite only, pymupdf4llm reads no images
  without OCR; PDFs: both).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shlex
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

from bench._heldout_fetch import fetch, table_html
from bench._heldout_sources import SOURCES

DEFAULT_DIR = Path("/work/heldout")


# ---------------------------------------------------------------- engines


def lite_page(path: str, index: int, image=None) -> tuple[str, list[str], float]:
    """(Markdown, tables' HTML, seconds) of one page by lite: a PDF page, or an image."""
    import pypdfium2 as pdfium
    from PIL import Image

    from ocrserve import Document, Source, load_profile, parse_output, render_markdown
    from ocrserve.engines.base import PageInput
    from ocrserve.engines.lite.engine import lite_raw_for

    prof = load_profile("chandra-1")
    if image is not None or path.endswith(".png"):
        img = image if image is not None else Image.open(path).convert("RGB")
        page = PageInput(
            doc_id="x", index=0, image=img, width=img.width, height=img.height, unit="px", source_type="png"
        )
        size = (img.width, img.height)
    else:
        doc = pdfium.PdfDocument(path)
        w, h = doc[index].get_size()
        doc.close()
        page = PageInput(
            doc_id="x",
            index=index,
            image=Image.new("RGB", (8, 8)),
            width=w,
            height=h,
            unit="pt",
            source_path=path,
            source_type="pdf",
        )
        size = (w, h)
    t0 = time.perf_counter()
    raw = lite_raw_for(page, prof)
    dt = time.perf_counter() - t0
    parsed = parse_output(raw, prof, size, index=index, unit=page.unit)
    md = render_markdown(Document(source=Source(path=path, type=page.source_type, page_count=1), pages=[parsed]))
    return md, [b.html for b in parsed.blocks if b.label == "Table"], dt


def pymupdf_page(path: str, index: int) -> tuple[str, list[str], float]:
    import pymupdf4llm

    t0 = time.perf_counter()
    md = pymupdf4llm.to_markdown(path, pages=[index], show_progress=False)
    return md, pipe_tables(md), time.perf_counter() - t0


def pipe_tables(md: str) -> list[str]:
    """Markdown pipe tables -> HTML tables (first row as the header)."""
    out, rows = [], []
    for line in [*md.splitlines(), ""]:
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            if not re.fullmatch(r"\|[\s:|-]+\|", s):
                rows.append([c.strip().replace("<br>", " ") for c in s[1:-1].split("|")])
            continue
        if rows:
            out.append(table_html(rows))
            rows = []
    return out


# ---------------------------------------------------------------- metrics


_BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def words(text: str) -> list[str]:
    # bidi controls (pdftotext wraps every left-to-right run of RTL text in LRE ... PDF) end a word:
    # "exam\u202c\u0641\u064a" is two words on the page
    text = _BIDI_CONTROLS.sub(" ", unicodedata.normalize("NFKC", text))
    text = re.sub(r"<[^>]+>", " ", text)
    return [w for w in (re.sub(r"^[\W_]+|[\W_]+$", "", t).lower() for t in text.split()) if w]


def word_f1(pred: str, ref: str) -> float:
    p, r = Counter(words(pred)), Counter(words(ref))
    common = sum((p & r).values())
    if not common:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(r.values())
    return 2 * prec * rec / (prec + rec)


def order_similarity(pred: str, ref: str) -> float:
    from rapidfuzz.distance import Levenshtein

    return float(Levenshtein.normalized_similarity(words(pred), words(ref)))


def pdftotext(path: str, index: int) -> str:
    return subprocess.run(
        ["pdftotext", "-f", str(index + 1), "-l", str(index + 1), "-enc", "UTF-8", path, "-"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def pymupdf_text(path: str, index: int) -> str:
    """PyMuPDF's plain text of a page: the second reference of the rtl kind."""
    import pymupdf

    doc = pymupdf.open(path)
    try:
        return str(doc[index].get_text())
    finally:
        doc.close()


def rtl_f1(pred: str, refs: list[str]) -> float:
    """Word F1 against the better of two readings of the text layer: pdftotext splits a fully vocalised
    word at its harakat ("\u062f \u064e\u062c \u064e\u0627\u062c \u064e\u0629"), PyMuPDF does not; neither is
    right everywhere."""
    return max(word_f1(pred, r) for r in refs)


def _norm_heading(t: str) -> str:
    t = unicodedata.normalize("NFKC", t).lower()
    t = re.sub(r"^\s*(#+\s*)?((\d+|[a-z]|[ivx]+)(\.\d+)*\.?\s+)?", "", t)
    return re.sub(r"[\W_]+", " ", t).strip()


def md_headings(md: str) -> list[str]:
    return [re.sub(r"^#+\s*", "", l).replace("*", "").strip() for l in md.splitlines() if re.match(r"^#{1,6}\s", l)]


def outline(path: str) -> list[tuple[str, int]]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(path)
    try:
        return [(b.get_title(), b.get_dest().get_index()) for b in doc.get_toc() if b.get_dest() is not None]
    finally:
        doc.close()


def heading_match(pred: list[str], truth: list[str]) -> tuple[int, int]:
    """(truth entries found, predicted headings that are entries)."""
    from rapidfuzz import fuzz

    p, t = [_norm_heading(x) for x in pred], [_norm_heading(x) for x in truth]
    found = sum(1 for x in t if any(fuzz.ratio(x, y) >= 80 for y in p))
    right = sum(1 for y in p if any(fuzz.ratio(x, y) >= 80 for x in t))
    return found, right


def teds(pred: str | None, truth: str) -> float:
    from table_recognition_metric import TEDS

    if not pred:
        return 0.0
    wrap = "<html><body>{}</body></html>"
    return float(TEDS(structure_only=False)(wrap.format(pred), wrap.format(truth)))


# ---------------------------------------------------------------- score


def scan_of(path: str, index: int, seed: int):
    """A page rasterised at 150 dpi, skewed by 0.5 degree, with noise: a scan."""
    import numpy as np
    import pypdfium2 as pdfium
    from PIL import Image

    doc = pdfium.PdfDocument(path)
    img = doc[index].render(scale=150 / 72).to_pil().convert("L")
    doc.close()
    img = img.rotate(0.5, fillcolor=255, resample=Image.Resampling.BICUBIC)
    a = np.asarray(img).astype(np.float32) + np.random.default_rng(seed).normal(0, 10, (img.height, img.width))
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).convert("RGB")


def score(manifest: list[dict], only: set[str]) -> dict:
    res: dict[str, list[dict]] = {}
    for n, s in enumerate(manifest):
        kind = s["kind"]
        if only and kind not in only:
            continue
        print(f"[{kind}] {s.get('name') or Path(s['path']).name}", file=sys.stderr, flush=True)
        rows = res.setdefault(kind, [])
        if kind == "tables":
            truth = s["truth"]
            _, lt, dt = lite_page(s["path"] + ".png", 0)
            _, lp, dp = lite_page(s["path"] + ".pdf", 0)
            _, pp, tp = pymupdf_page(s["path"] + ".pdf", 0)
            rows.append(
                {
                    "doc": s["name"],
                    "source": s["source"],
                    "lite_image": teds(lt[0] if lt else None, truth),
                    "lite_pdf": teds(lp[0] if lp else None, truth),
                    "pymupdf4llm_pdf": teds(pp[0] if pp else None, truth),
                    "lite_image_s": dt,
                }
            )
            continue
        for index in s["pages"]:
            row: dict = {"doc": Path(s["path"]).name, "page": index + 1}
            if kind == "rtl":
                refs = [pdftotext(s["path"], index), pymupdf_text(s["path"], index)]
                lmd, pmd = lite_page(s["path"], index)[0], pymupdf_page(s["path"], index)[0]
                row["lite"], row["pymupdf4llm"] = rtl_f1(lmd, refs), rtl_f1(pmd, refs)
                row["lite_pdftotext"], row["pymupdf4llm_pdftotext"] = word_f1(lmd, refs[0]), word_f1(pmd, refs[0])
            elif kind == "headings":
                truth = [t for t, p in outline(s["path"]) if p == index]
                row["truth"] = len(truth)
                for name, fn in (("lite", lite_page), ("pymupdf4llm", pymupdf_page)):
                    pred = md_headings(fn(s["path"], index)[0])
                    found, right = heading_match(pred, truth)
                    row[name] = {"predicted": len(pred), "found": found, "right": right}
            elif kind == "columns":
                ref = pdftotext(s["path"], index)
                md, _, dt = lite_page(s["path"], index, image=scan_of(s["path"], index, n))
                row.update(lite_scan_order=order_similarity(md, ref), lite_scan_f1=word_f1(md, ref), lite_scan_s=dt)
                md = lite_page(s["path"], index)[0]
                row.update(lite_pdf_order=order_similarity(md, ref), lite_pdf_f1=word_f1(md, ref))
                md = pymupdf_page(s["path"], index)[0]
                row.update(pymupdf4llm_pdf_order=order_similarity(md, ref), pymupdf4llm_pdf_f1=word_f1(md, ref))
            rows.append(row)
    return res


def summary(res: dict) -> dict:
    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 3) if xs else float("nan")

    out: dict = {}
    if "rtl" in res:
        keys = ("lite", "pymupdf4llm", "lite_pdftotext", "pymupdf4llm_pdftotext")
        out["rtl_word_f1"] = {k: mean([r[k] for r in res["rtl"]]) for k in keys}
    if "headings" in res:
        h = {}
        for k in ("lite", "pymupdf4llm"):
            truth = sum(r["truth"] for r in res["headings"])
            found = sum(r[k]["found"] for r in res["headings"])
            pred = sum(r[k]["predicted"] for r in res["headings"])
            right = sum(r[k]["right"] for r in res["headings"])
            h[k] = {"recall": round(found / max(truth, 1), 3), "precision": round(right / max(pred, 1), 3)}
        out["headings"] = h
    if "columns" in res:
        keys = [k for k in res["columns"][0] if k not in ("doc", "page")]
        out["columns"] = {k: mean([r[k] for r in res["columns"]]) for k in keys}
    if "tables" in res:
        keys = ("lite_image", "lite_pdf", "pymupdf4llm_pdf", "lite_image_s")
        out["tables_teds"] = {k: mean([r[k] for r in res["tables"]]) for k in keys}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.heldout", description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["fetch", "score"])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where the documents go (outside the repository)")
    ap.add_argument(
        "--sources", type=Path, help="JSON lines of {kind, fetch, pages} records (default: bench/_heldout_sources.py)"
    )
    ap.add_argument("--out", type=Path, default=Path("bench/results/heldout-lite"))
    ap.add_argument("--only", default="", help="kinds to score: rtl,headings,columns,tables (default: all)")
    a = ap.parse_args(argv)
    if a.step == "fetch":
        sources = [json.loads(l) for l in a.sources.read_text().splitlines() if l.strip()] if a.sources else SOURCES
        made = fetch(a.dir, sources)
        print(f"{len(made)} documents in {a.dir}")
        return 0
    manifest_file = a.dir / "manifest.json"
    if not manifest_file.exists():
        print(f"{manifest_file}: not found; run `python -m bench.heldout fetch --dir {a.dir}` first", file=sys.stderr)
        return 2
    t0 = time.time()
    res = score(json.loads(manifest_file.read_text()), {k for k in a.only.split(",") if k})
    a.out.mkdir(parents=True, exist_ok=True)
    from importlib.metadata import PackageNotFoundError, version

    def ver(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "-"

    names = ("pymupdf4llm", "pymupdf", "rapidocr", "onnxruntime", "pypdfium2", "table-recognition-metric", "apted")
    report = {
        "command": "python -m bench.heldout "
        + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()} {platform.processor() or ''} Python {platform.python_version()}",
        "versions": {n: ver(n) for n in names},
        "seconds": round(time.time() - t0, 1),
        "summary": summary(res),
        "results": res,
    }
    (a.out / "results.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(json.dumps(report["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
