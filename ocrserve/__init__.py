"""ocrserve: documents to structured Markdown, HTML and JSON with Chandra OCR models."""

from __future__ import annotations

from ocrserve.document import SCHEMA_VERSION, Block, Document, Page, PageStatus, Source
from ocrserve.errors import OcrserveError
from ocrserve.parse import is_repetition_loop, parse_output
from ocrserve.profiles import PROFILES, Profile, load_profile
from ocrserve.render import render_html, render_json, render_markdown

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "Block",
    "Document",
    "Page",
    "Source",
    "Profile",
    "PROFILES",
    "load_profile",
    "parse_output",
    "is_repetition_loop",
    "render_markdown",
    "render_html",
    "render_json",
    "convert",
    "aconvert",
    "ConversionResult",
    "ConversionError",
    "OcrserveError",
    "PageStatus",
]


def convert(paths, *, raises_on_error=False, **options):
    """Convert files/folders/globs (and write files under `output_dir`, when given): one
    ConversionResult per document, in input order, failed ones included (`status`, `document`,
    `error`, `output`); `raises_on_error=True` raises a ConversionError (holding the results) when a
    document failed.

    The keywords are the options of `ocrserve convert`, by their field names (`pages="1-3"`,
    `fallback=False`, `server=...`), or `options=ConvertOptions(...)`: each is declared once on
    `ocrserve.pipeline.options.ConvertOptions` (its help, type and default; `ConvertOptions.declared()`
    lists them), an unknown or bad one is an OptionsError naming it, and one not given takes its
    default from Settings (OCRSERVE_<NAME>) where the declaration says so."""
    from ocrserve.pipeline.convert import convert as _convert

    return _convert(paths, raises_on_error=raises_on_error, **options)


async def aconvert(paths, *, raises_on_error=False, **options):
    """Async variant of convert(), with the same options."""
    from ocrserve.pipeline.convert import aconvert as _aconvert

    return await _aconvert(paths, raises_on_error=raises_on_error, **options)


def __getattr__(name):
    """ConversionResult and ConversionError, imported when first asked for (`import ocrserve` stays light)."""
    if name in ("ConversionResult", "ConversionError"):
        from ocrserve.pipeline import results

        return getattr(results, name)
    raise AttributeError(f"module 'ocrserve' has no attribute {name!r}")
