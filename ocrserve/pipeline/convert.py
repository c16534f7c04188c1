"""The Python API's one-call conversion (`ocrserve.convert`, `ocrserve.aconvert`): files, folders and
globs to one result per document found (a ConversionResult: its status, Document and error), with a
local Converter for the call (and files, when `output_dir` is given)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ocrserve.pipeline.local import Converter
from ocrserve.pipeline.results import ConversionError, DocResult


async def aconvert(
    paths: str | Path | Sequence[str | Path],
    *,
    output_dir: str | Path | None = None,
    raises_on_error: bool = False,
    **options: Any,
) -> list[DocResult]:
    """Convert files/folders/globs; one result per document, in input order, failed ones included
    (status failed, `error` says why). raises_on_error: a ConversionError (holding the results) when
    any document failed. Bad options and an input that names nothing raise whatever this says."""
    conv = Converter(output_dir=output_dir, **options)
    try:
        summary = await conv.run([paths] if isinstance(paths, (str, Path)) else list(paths))
    finally:
        await conv.aclose()
    if raises_on_error and summary.failed:
        raise ConversionError(summary.results)
    return summary.results


def convert(
    paths: str | Path | Sequence[str | Path],
    *,
    output_dir: str | Path | None = None,
    raises_on_error: bool = False,
    **options: Any,
) -> list[DocResult]:
    """Synchronous aconvert(): files/folders/globs -> one ConversionResult per document."""
    results: list[DocResult] = []

    async def main() -> None:
        # the results are kept out of the main task's result: asyncio.run, closing, formats that task
        # (the SIGINT handler it put back is turned into an enum by trying it, and the ValueError's message
        # is its %r), which would format every document of the run once more
        results.extend(await aconvert(paths, output_dir=output_dir, raises_on_error=raises_on_error, **options))

    asyncio.run(main())
    return results
