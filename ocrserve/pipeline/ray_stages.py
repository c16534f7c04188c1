"""The Ray Data stages of a distributed conversion, as plain functions over rows.

documents --open (flat_map, CPU)--> one row per selected page (or one skipped/failed row per document)
          --render (map, CPU)--> + the page PNG
          --engine (map_batches, actors: one engine per GPU / per CPU slot)--> + the raw model answer
          --finish (map, CPU)--> + the parsed Page as JSON and its figure crops; PNG dropped
and the driver assembles documents from the finished rows (ray.py). The engine stage's actor is
ray_engine.py's; these are the CPU stages and the rows.

Every row carries every column (same types throughout: "" / 0 / -1 for "none"), so blocks from
different stages and documents always share one Arrow schema. The stages only move rows: each step
(plan the document, render, engine + fallback, parse, the page's account) is pipeline/page.py's or
output.py's, the same functions the local scheduler calls, so both produce the same files.

Opening and rendering run in a child process of the Ray worker (isolate.py): a file that crashes
pdfium fails alone, with the local pipeline's reason, and never takes the task (and the other
documents' pages in its block) down with it.
"""

from __future__ import annotations

import json
import pickle
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ocrserve.document import Page
from ocrserve.engines import EngineResult, PageInput
from ocrserve.export.formats import DEFAULT_FORMATS
from ocrserve.ingest.isolate import isolated
from ocrserve.ingest.raster import Budget, RenderedPage, open_source, render_page
from ocrserve.ingest.sources import PageSelection, SourceFile
from ocrserve.pipeline import page as steps
from ocrserve.pipeline.output import Existing, done_though_unreadable, plan_document
from ocrserve.profiles import Profile, load_profile

# kind: page (a page to convert), skipped (complete output already there), updated (its pages done: the
# formats it lacks rendered from its JSON by the driver), failed (document unreadable)
COLUMNS: dict[str, Any] = {
    "kind": "page",
    "doc": -1,
    "name": "",
    "path": "",
    "abspath": "",
    "type": "",
    "sha256": "",
    "page_count": 0,
    "n_pages": 0,
    "index": -1,
    "error": "",
    "formats": "",  # comma-separated: a page's document is written in these; an updated one gets these added
    "redo": "",  # why a document's earlier pages are converted again
    "keep": "",  # comma-separated: the pages the driver keeps from the output there (n_pages: the others)
    # render
    "png": b"",
    "width": 0.0,
    "height": 0.0,
    "unit": "pt",
    "image_width": 0,
    "image_height": 0,
    "render_s": 0.0,
    # engine
    "raw": "",
    "fill_raw": "",
    "status": "",
    "engine": "",
    "attempts": 0,
    "prompt_tokens": -1,
    "completion_tokens": -1,
    "finish_reason": "",
    "model_error": "",
    "engine_s": 0.0,
    "has_result": False,
    # finish
    "page_json": "",
    "figures": b"",
}


def make_row(**values: Any) -> dict[str, Any]:
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise KeyError(f"unknown row columns: {sorted(unknown)}")
    row = dict(COLUMNS)
    row.update(values)
    return row


@dataclass(frozen=True)
class StageConfig:
    """What the CPU stages need, shipped to the workers."""

    model: Profile  # the Profile itself travels (a profile file need not exist on the workers)
    budget: Budget
    password: str | None = None
    max_image_pixels: int = 200_000_000
    page_filter: PageSelection | None = None
    figures: bool = True
    keep_raw: bool = False
    writes: bool = True  # an output is written (naming and resume apply)
    force: bool = False
    formats: tuple[str, ...] = DEFAULT_FORMATS
    redo_fallback: bool = False  # the engine is a model: pages the fallback wrote in an earlier run are redone


# ------------------------------------------------------------------------------------------ open


def existing_json(e: Existing | None) -> str:
    """An output's Existing as a row value (the driver reads outputs; the open stage decides)."""
    if e is None:
        return ""
    return json.dumps({k: sorted(v) if isinstance(v, frozenset) else v for k, v in asdict(e).items()})


def _existing(value: str) -> Existing | None:
    if not value:
        return None
    values: dict[str, Any] = {k: frozenset(v) if isinstance(v, list) else v for k, v in json.loads(value).items()}
    return Existing(**values)


def open_doc(doc: dict[str, Any], cfg: StageConfig) -> list[dict[str, Any]]:
    """A document row -> its page rows; one skipped or failed row when there is nothing to convert."""
    base = {"doc": doc["doc"], "name": doc["name"], "path": doc["path"], "abspath": doc["abspath"]}
    try:
        info = isolated(open_source, doc["abspath"], cfg.password, cfg.max_image_pixels)
    except Exception as e:  # noqa: BLE001 - one bad document never stops the others
        if (
            cfg.writes
            and not cfg.force
            and done_though_unreadable(e, _existing(doc["here"]), cfg.page_filter, cfg.formats)
        ):
            return [make_row(kind="skipped", **base)]
        return [make_row(kind="failed", error=steps.open_error(e), **base)]
    plan = plan_document(
        SourceFile(path=Path(doc["path"]), name=doc["name"]),
        info.sha256,
        info.page_count,
        steps.page_indices(cfg.page_filter, info.page_count),
        writes=cfg.writes,
        force=cfg.force,
        here=_existing(doc["here"]),
        alt=lambda: _existing(doc["alt"]),
        formats=cfg.formats,
        redo_fallback=cfg.redo_fallback,
        model=cfg.model.name if cfg.redo_fallback else None,
    )
    meta = dict(base, name=plan.src.name, type=info.type, sha256=info.sha256, page_count=info.page_count)
    meta.update(formats=",".join(plan.formats), redo=plan.redo or "", keep=",".join(map(str, sorted(plan.keep))))
    if plan.status is not None:
        return [make_row(kind=plan.status, error=plan.error or "", **meta)]
    convert = [i for i in plan.indices if i not in plan.keep]  # the driver adds the kept pages
    return [make_row(kind="page", n_pages=len(convert), index=i, **meta) for i in convert]


# ---------------------------------------------------------------------------------------- render


def render_row(row: dict[str, Any], cfg: StageConfig) -> dict[str, Any]:
    if row["kind"] != "page":
        return row
    try:
        rp = isolated(
            render_page, row["abspath"], row["type"], row["index"], cfg.budget, cfg.password, cfg.max_image_pixels
        )
    except Exception as e:  # noqa: BLE001 - a page that cannot be rendered fails alone
        row["page_json"] = steps.render_failed(row["index"], e).model_dump_json()
        return row
    row.update(asdict(rp))  # its columns are RenderedPage's fields
    return row


def rendered(row: dict[str, Any]) -> RenderedPage:
    return RenderedPage(**{f.name: row[f.name] for f in fields(RenderedPage)})


def page_input(row: dict[str, Any], password: str | None) -> PageInput:
    return steps.page_input(row["name"], rendered(row), row["abspath"], row["type"], password)


# ---------------------------------------------------------------------------------------- finish


def finish_row(row: dict[str, Any], cfg: StageConfig) -> dict[str, Any]:
    """Parse the raw answer into a Page (figure crops collected as bytes): the local run's steps."""
    if row["kind"] != "page" or row["page_json"]:
        row["png"] = b""
        return row
    profile = load_profile(cfg.model)
    rp = rendered(row)
    res = EngineResult(
        raw=row["raw"],
        ok=row["status"] != "failed",
        engine=row["engine"],
        attempts=row["attempts"],
        finish_reason=row["finish_reason"] or None,
        prompt_tokens=None if row["prompt_tokens"] < 0 else row["prompt_tokens"],
        completion_tokens=None if row["completion_tokens"] < 0 else row["completion_tokens"],
        extra={"fill_raw": row["fill_raw"]} if row.get("fill_raw") else {},
    )
    files: dict[str, bytes] = {}
    parsed: Page | BaseException | None = None
    if row["status"] != "failed":
        try:
            with tempfile.TemporaryDirectory(prefix="ocrserve-fig-") as tmp:
                parsed = steps.finish_page(
                    res.raw,
                    profile,
                    png=rp.png if cfg.figures else None,
                    staging=tmp if cfg.figures else None,
                    prefix=row["name"].rsplit("/", 1)[-1],
                    **steps.parse_kwargs(res, rp),
                )
                for p in sorted(Path(tmp).rglob("*")):
                    if p.is_file():
                        files[p.relative_to(tmp).as_posix()] = p.read_bytes()
        except Exception as e:  # noqa: BLE001 - as the local run: the page fails, the run goes on
            parsed = e
    page = steps.result_page(
        res,
        row["status"],
        row["model_error"] or None,
        rp,
        parsed,
        engine_s=row["engine_s"],
        default_engine="",
        keep_raw=cfg.keep_raw,
    )
    row.update(
        page_json=page.model_dump_json(), figures=pickle.dumps(files) if files else b"", png=b"", raw="", fill_raw=""
    )
    return row


def row_figures(row: dict[str, Any]) -> dict[str, bytes]:
    return pickle.loads(row["figures"]) if row["figures"] else {}
