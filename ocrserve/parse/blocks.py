"""Raw Chandra output -> Page of Blocks. Never raises on model output."""

from __future__ import annotations

import html as htmllib
import re

from selectolax.lexbor import LexborNode

from ..document import Block, Page
from ..profiles import Profile, load_profile
from ..render.markdown import block_markdown, node_text
from .sanitize import MathStore, math_html, parse_fragment, protect_math, sanitize_node

_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LABEL_SAFE = re.compile(r"[^A-Za-z0-9_\- ]")


def parse_bbox(value: str | None, scale: float) -> tuple[list[float], str]:
    """Box in model units -> (box clamped to 0..scale, source). Accepts `[x0, y0, x1, y1]` and `x0 y0 x1 y1`."""
    full = [0.0, 0.0, float(scale), float(scale)]
    if not value:
        return full, "missing"
    nums = [float(x) for x in _NUM.findall(value)]
    if len(nums) != 4 or not all(abs(v) < 1e9 for v in nums):
        return full, "missing"
    x0, y0, x1, y1 = nums
    source = "model"
    if x0 > x1:
        x0, x1, source = x1, x0, "fixed"
    if y0 > y1:
        y0, y1, source = y1, y0, "fixed"
    clamped = [min(max(v, 0.0), float(scale)) for v in (x0, y0, x1, y1)]
    if clamped != [x0, y0, x1, y1]:
        source = "fixed"
    return clamped, source


def canonical_label(label: str | None, known: list[str]) -> str:
    """The label as written, in its canonical spelling when it is a known one; unknown labels kept."""
    if not label or not label.strip():
        return "Text"
    label = _LABEL_SAFE.sub("", label.strip())[:64] or "Text"
    lookup = {k.lower().replace("_", "-").replace(" ", "-"): k for k in known}
    return lookup.get(label.lower().replace("_", "-").replace(" ", "-"), label)


def _inner_html(node: LexborNode, store: MathStore) -> str:
    inner = node.inner_html or ""
    return math_html(store, inner).strip()


def parse_output(
    raw: str | None,
    profile: Profile | str | None = None,
    page_size: tuple[float, float] = (1.0, 1.0),
    *,
    index: int = 0,
    unit: str = "pt",
    truncated: bool | None = None,
) -> Page:
    """Parse a model's raw HTML layout answer into a Page whose blocks are in reading order.

    `page_size` is the size of the original page (PDF points or image pixels); boxes come back in
    those coordinates and normalized to 0-1. `truncated` says the answer was cut off (finish reason
    `length`); when None it is inferred from the text.
    """
    prof = load_profile(profile)
    width, height = float(page_size[0]) or 1.0, float(page_size[1]) or 1.0
    raw = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
    store = MathStore()
    protected = protect_math(raw, store)
    tree = parse_fragment(protected)
    body = tree.body
    page = Page(index=index, width=width, height=height, unit="px" if unit == "px" else "pt")
    if body is None:
        return page
    sanitize_node(body, set(prof.allowed_tags) | {"div"}, set(prof.allowed_attrs) | {"data-bbox", "data-label"})

    stripped = raw.rstrip()
    if truncated is None:
        truncated = bool(stripped) and not stripped.lower().endswith(("</div>", "</div >"))

    pending: list[str] = []  # HTML outside any layout div, gathered into a Text block

    def add_block(label: str, bbox_attr: str | None, inner: str, node: LexborNode | None) -> None:
        box, source = parse_bbox(bbox_attr, prof.bbox_scale)
        s = float(prof.bbox_scale)
        norm = [box[0] / s, box[1] / s, box[2] / s, box[3] / s]
        frag = node if node is not None else parse_fragment(inner).body
        # math placeholders are substituted at render time: keep them in a private fragment
        html_inner = _inner_html(frag, store) if frag is not None else ""
        block = Block(
            index=len(page.blocks),
            label=label,
            bbox=[norm[0] * width, norm[1] * height, norm[2] * width, norm[3] * height],
            bbox_norm=norm,
            bbox_source=source,  # type: ignore[arg-type]
            html=html_inner,
            text=node_text(frag, store) if frag is not None else "",
        )
        block.markdown = block_markdown(block, frag, store)
        if block.text.strip() or block.markdown.strip() or label not in ("Text",):
            page.blocks.append(block)
        else:
            block.index = -1

    def flush_pending() -> None:
        if pending:
            inner = "".join(pending)
            pending.clear()
            if htmllib.unescape(re.sub(r"<[^>]*>", "", inner)).strip() or "\ue000" in inner:
                add_block("Text", None, inner, None)

    child = body.child
    while child is not None:
        nxt = child.next
        tag = (child.tag or "").lower()
        if tag == "div" and ("data-label" in child.attributes or "data-bbox" in child.attributes):
            flush_pending()
            label = canonical_label(child.attributes.get("data-label"), prof.labels)
            add_block(label, child.attributes.get("data-bbox"), "", child)
        elif tag == "-text":
            pending.append(htmllib.escape(child.text_content or "", quote=False))
        else:
            pending.append(child.html or "")
        child = nxt
    flush_pending()
    if page.blocks and truncated:
        page.blocks[-1].truncated = True
    return page
