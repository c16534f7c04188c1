"""Figure crops through the API: the pipeline crops them into a document folder of the conversion's own
(`Service.convert(figures_dir=...)`); here they are handed to the client.

- a conversion answered at once (`/v1/convert`, and a stream's `done` event): each crop is kept in the
  service's byte-bounded image cache (as the viewer's page images) under a token, and the Document's
  `figure` and its Markdown image link become `/v1/figures/<token>.png`;
- a job: the crops are kept in the job's folder (`images/`), the stored result keeps its relative links
  (`images/<name>`, as `ocrserve convert` writes them), and the job routes answer them as
  `/v1/jobs/<id>/images/<name>`; `/v1/jobs/<id>/archive` is the document folder as a zip (md, html, json
  and images/, the links relative, as `ocrserve convert` writes it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from ocrserve.api.images import PageImages
from ocrserve.document import Document
from ocrserve.export.formats import RenderContext, get_format
from ocrserve.render.markdown import block_markdown

IMAGES = "images"
ARCHIVE_FORMATS = ("md", "html", "json")


def relink(doc: Document, url: Callable[[str], str | None]) -> int:
    """Every figure block's `figure` (a path relative to the document folder) replaced by url(path), and its
    Markdown with it; a figure url() gives None for is left without its image (its description stays).
    Returns how many figures link somewhere."""
    n = 0
    for page in doc.pages:
        for b in page.blocks:
            if not b.figure:
                continue
            b.figure = url(b.figure)
            b.markdown = block_markdown(b)
            n += b.figure is not None
    return n


def has_figures(doc: Document) -> bool:
    return any(b.figure for p in doc.pages for b in p.blocks)


def cache_figures(doc: Document, folder: Path | None, images: PageImages, owner: str) -> None:
    """A finished conversion's crops (under folder, the document folder) into the image cache; the
    Document links them as /v1/figures/<token>.png. In a thread: it reads files."""
    if folder is None or not has_figures(doc):
        return

    def url(rel: str) -> str | None:
        path = folder / rel
        try:
            token = images.put(path.read_bytes(), owner)
        except OSError:
            return None
        return f"/v1/figures/{token}.png" if token else None

    relink(doc, url)


def keep_figures(folder: Path | None, images_dir: Path, kept: Path | None = None) -> None:
    """A job's crops (under folder, the document folder the pipeline wrote) moved into the job's images/,
    with those of pages kept from an interrupted run (`kept`, where they were saved with the pages)."""
    shutil.rmtree(images_dir, ignore_errors=True)
    if folder is not None and (folder / IMAGES).is_dir():
        os.replace(folder / IMAGES, images_dir)
    if kept is not None and kept.is_dir():
        images_dir.mkdir(exist_ok=True)
        for p in kept.iterdir():
            if p.is_file() and not (images_dir / p.name).exists():
                os.replace(p, images_dir / p.name)


def image_path(images_dir: Path, name: str) -> Path | None:
    """The job's crop called name (a plain file name, nothing else), or None."""
    if not name or name != PurePosixPath(name).name or name.startswith("."):
        return None
    path = images_dir / name
    return path if path.is_file() else None


def job_links(doc: Document, job_id: str) -> bool:
    """A stored job result's relative figure links made URLs of the job's images; True if any."""
    prefix = f"{IMAGES}/"
    return bool(
        relink(
            doc, lambda rel: f"/v1/jobs/{job_id}/images/{quote(rel[len(prefix) :])}" if rel.startswith(prefix) else None
        )
    )


def build_archive(doc: Document, images_dir: Path, keep_hf: bool) -> Path:
    """The document folder as a zip in a temporary file (the caller removes it): <stem>/<stem>.md, .html,
    .json and <stem>/images/*, the links relative, as `ocrserve convert` writes the folder."""
    stem = PurePosixPath(doc.source.path.replace("\\", "/")).stem or "document"
    ctx = RenderContext(keep_headers_footers=keep_hf)
    fd, name = tempfile.mkstemp(prefix="ocrserve-archive-", suffix=".zip")
    os.close(fd)
    try:
        with zipfile.ZipFile(name, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for fmt in ARCHIVE_FORMATS:
                f = get_format(fmt)
                z.writestr(f"{stem}/{stem}{f.suffix}", f.to_bytes(doc, ctx))
            if images_dir.is_dir():
                for p in sorted(images_dir.iterdir()):
                    if p.is_file():  # crops are PNG already: stored, not deflated again
                        z.write(p, f"{stem}/{IMAGES}/{p.name}", compress_type=zipfile.ZIP_STORED)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)
