from ocrserve.render.figures import crop_figures
from ocrserve.render.html import render_html
from ocrserve.render.markdown import block_markdown, render_markdown
from ocrserve.render.text import render_text


def render_json(doc, *, indent: int | None = 2) -> str:
    """The Document as JSON (schema_version inside)."""
    return doc.model_dump_json(
        indent=indent, exclude={"pages": {"__all__": {"raw"}}} if not any(p.raw for p in doc.pages) else None
    )


__all__ = ["render_markdown", "render_html", "render_json", "render_text", "block_markdown", "crop_figures"]
