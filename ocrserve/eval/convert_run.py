"""``ocrserve eval --run``: convert a benchmark's PDFs with an ocrserve engine into a candidate folder.

Each tested page of each PDF is written as ``<candidate>/<pdf path without .pdf>_pg<N>_repeat<R>.md``
(the page's Markdown, page headers/footers dropped as in ``ocrserve convert``). Existing files are
kept unless ``force``. PDFs are converted in one ``ocrserve.convert`` call per distinct set of
tested pages.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ocrserve.eval.bench import Bench, repeat_file_name

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    pages_written: int = 0
    pages_kept: int = 0
    pages_failed: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The run's record in the report: the fields, wall_s as convert_wall_s (to 0.01 s)."""
        out = asdict(self)
        out["convert_wall_s"] = round(out.pop("wall_s"), 2)
        return out


def _page_spec(pages: list[int]) -> str:
    return ",".join(str(p) for p in pages)


def page_markdown(doc, page) -> str:
    """Markdown of one page of ``doc`` (as ``ocrserve convert`` would write it for that page alone)."""
    from ocrserve.render import render_markdown

    return render_markdown(doc.model_copy(update={"pages": [page]}))


def run_conversion(
    bench: Bench,
    candidate: Path,
    *,
    repeats: int = 1,
    force: bool = False,
    convert_options: dict[str, Any] | None = None,
) -> RunStats:
    """Convert every tested page ``repeats`` times into ``candidate``."""
    import ocrserve

    candidate.mkdir(parents=True, exist_ok=True)
    stats = RunStats()
    pdf_root = bench.root / "pdfs"
    tested = {pdf: pages for pdf, pages in bench.tested_pages().items() if (pdf_root / pdf).is_file()}
    options = dict(convert_options or {})
    for r in range(1, repeats + 1):
        todo: dict[tuple[int, ...], list[str]] = {}
        for pdf, pages in tested.items():
            targets = [candidate / repeat_file_name(pdf, p, r) for p in pages]
            if not force and all(t.is_file() for t in targets):
                stats.pages_kept += len(targets)
                continue
            todo.setdefault(tuple(pages), []).append(pdf)
        for wanted, pdfs in todo.items():
            paths = [pdf_root / pdf for pdf in pdfs]
            t0 = time.perf_counter()
            results = ocrserve.convert([str(p) for p in paths], pages=_page_spec(list(wanted)), **options)
            docs = [r.document for r in results if r.document is not None]
            stats.wall_s += time.perf_counter() - t0
            by_path = {str(Path(d.source.path).resolve()): d for d in docs}
            for pdf, path in zip(pdfs, paths):
                doc = by_path.get(str(path.resolve()))
                if doc is None and len(docs) == len(paths):
                    doc = docs[pdfs.index(pdf)]
                if doc is None:
                    stats.pages_failed += [f"{pdf} p{p} r{r}: no document returned" for p in wanted]
                    continue
                got = {pg.index + 1: pg for pg in doc.pages}
                for p in wanted:
                    target = candidate / repeat_file_name(pdf, p, r)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    page = got.get(p)
                    if page is None:
                        stats.pages_failed.append(f"{pdf} p{p} r{r}: page not in the converted document")
                        target.write_text("", encoding="utf-8")
                        continue
                    if page.status == "failed":
                        stats.pages_failed.append(f"{pdf} p{p} r{r}: {page.error or 'failed'}")
                    target.write_text(page_markdown(doc, page), encoding="utf-8")
                    stats.pages_written += 1
    return stats
