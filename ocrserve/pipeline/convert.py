"""The Python API's one-call conversion (`ocrserve.convert`, `ocrserve.aconvert`): files, folders and
globs to Documents with a local Converter for the call (and files, when `output_dir` is given)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ocrserve.document import Document
from ocrserve.pipeline.local import Converter

log = logging.getLogger(__name__)


async def aconvert(
    paths: str | Path | Sequence[str | Path], *, output_dir: str | Path | None = None, **options: Any
) -> list[Document]:
    """Convert files/folders/globs; returns the Documents (failed documents are logged and left out)."""
    conv = Converter(output_dir=output_dir, **options)
    try:
        summary = await conv.run([paths] if isinstance(paths, (str, Path)) else list(paths))
    finally:
        await conv.aclose()
    for r in summary.failed:
        if r.document is None:
            log.error("%s: %s", r.path, r.error)
    return [r.document for r in summary.results if r.document is not None]


def convert(
    paths: str | Path | Sequence[str | Path], *, output_dir: str | Path | None = None, **options: Any
) -> list[Document]:
    """Synchronous convert(): files/folders/globs -> Documents (and files when output_dir is given)."""
    return asyncio.run(aconvert(paths, output_dir=output_dir, **options))
