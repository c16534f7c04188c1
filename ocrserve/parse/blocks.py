"""Raw Chandra output -> Page of Blocks. Never raises on model output."""

from __future__ import annotations

import functools
import logging
import math
import re

from selectolax.lexbor import LexborNode

from ocrserve.document import BboxSource, Block, Page
from ocrserve.profiles import Profile, load_profile
from ocrserve.render.html_reuse import vouch_page, within_render_rules
from ocrserve.render.markdown import block_markdown, node_text
from ocrserve.sanitize import MathStore, prepare_fragment, serialize_children, serialize_nodes

log = logging.getLogger(__name__)

_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_LABEL_SAFE = re.compile(r"[^A-Za-z0-9_\- ]")
_END_DIV = re.compile(r"</div\s*>\s*$", re.IGNORECASE)
_CUT_TAG = re.compile(r"<[^<>]*$")  # a tag the token limit cut in half


def parse_bbox(value: str | None, scale: float) -> tuple[list[float], BboxSource]:
    """Box in model units -> (box clamped to 0..scale, source). Accepts `[x0, y0, x1, y1]` and `x0 y0 x1 y1`.

    source is "model" for a box used as written, "fixed" for one repaired (reversed corners,
    coordinates clamped into the page) and "missing" (the whole page) when there is no usable box.
    """
    scale = float(scale) if scale and math.isfinite(float(scale)) and float(scale) > 0 else 1024.0
    full = [0.0, 0.0, scale, scale]
    if not value:
        return full, "missing"
    try:
        nums = [float(x) for x in _NUM.findall(value)]
    except ValueError:  # pragma: no cover - the pattern only matches floats
        return full, "missing"
    if len(nums) != 4 or not all(math.isfinite(v) and abs(v) < 1e9 for v in nums):
        return full, "missing"
    x0, y0, x1, y1 = nums
    source: BboxSource = "model"
    if x0 > x1:
        x0, x1, source = x1, x0, "fixed"
    if y0 > y1:
        y0, y1, source = y1, y0, "fixed"
    clamped = [min(max(v, 0.0), scale) for v in (x0, y0, x1, y1)]
    if clamped != [x0, y0, x1, y1]:
        source = "fixed"
    return clamped, source


def canonical_label(label: str | None, known: list[str]) -> str:
    """The label as written, in its canonical spelling when it is a known one; unknown labels kept."""
    if not label or not label.strip():
        return "Text"
    label = _LABEL_SAFE.sub("", label.strip())[:64].strip() or "Text"
    return _label_lookup(tuple(known)).get(_label_key(label), label)


def _label_key(label: str) -> str:
    return label.lower().replace("_", "-").replace(" ", "-")


@functools.lru_cache(maxsize=16)
def _label_lookup(known: tuple[str, ...]) -> dict[str, str]:
    """A profile's labels by their spelling-blind key (made once a profile, not once a block)."""
    return {_label_key(k): k for k in known}


def _dimension(v: float) -> float:
    try:
        f = float(v)  # an untyped caller's junk (a string, None) is caught: the size is then 1
    except (TypeError, ValueError):
        return 1.0
    return f if math.isfinite(f) and f > 0 else 1.0


def _is_layout_div(node: LexborNode) -> bool:
    return (node.tag or "").lower() == "div" and ("data-label" in node.attributes or "data-bbox" in node.attributes)


def _contains_layout_div(node: LexborNode) -> bool:
    return (
        (node.tag or "").lower() not in ("-text", "table")
        and node.is_element_node
        and (node.css_first("div[data-label], div[data-bbox]") is not None)
    )


def parse_output(
    raw: str | None,
    profile: Profile | str | None = None,
    page_size: tuple[float, float] | None = (1.0, 1.0),
    *,
    index: int = 0,
    unit: str = "pt",
    truncated: bool | None = None,
) -> Page:
    """Parse a model's raw HTML layout answer into a Page whose blocks are in reading order.

    `page_size` is the size of the original page (PDF points or image pixels); boxes come back in
    those coordinates and normalized to 0-1. `truncated` says the answer was cut off (finish reason
    `length`); when None it is inferred from the text (an answer not ending in `</div>`).
    Never raises on model output: garbage becomes Text blocks, bad boxes the whole page.
    """
    prof = load_profile(profile)
    size = tuple(page_size) if isinstance(page_size, (tuple, list)) and len(page_size) == 2 else (1.0, 1.0)
    width, height = _dimension(size[0]), _dimension(size[1])
    raw = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
    page = Page(index=index, width=width, height=height, unit="px" if unit == "px" else "pt")
    tags = set(prof.allowed_tags) | {"div"}
    # + an ordered list's `start` (upstream's allow-list drops it: exercises 150-158 would read 1-9)
    attrs = set(prof.allowed_attrs) | {"data-bbox", "data-label", "start"}
    reusable = within_render_rules(tags, attrs)  # the HTML renderer may write these blocks' HTML as is

    stripped = raw.rstrip()
    if truncated is None:
        truncated = bool(stripped) and not _END_DIV.search(stripped)
    low = raw.lower()
    if truncated and low.rfind("<math") <= low.rfind("</math"):  # not inside an open formula
        cut = _CUT_TAG.search(raw)
        if cut and re.fullmatch(r"</?(?:[A-Za-z][^<>]*)?", cut.group(0)):
            raw = raw[: cut.start()]
    body, store = prepare_fragment(raw, tags, attrs)
    if body is None:
        return page

    scale = float(prof.bbox_scale) if prof.bbox_scale and prof.bbox_scale > 0 else 1024.0

    def add_block(label: str, bbox_attr: str | None, node: LexborNode, st: MathStore) -> None:
        box, source = parse_bbox(bbox_attr, scale)
        norm = [box[0] / scale, box[1] / scale, box[2] / scale, box[3] / scale]
        block = Block(
            index=len(page.blocks),
            label=label,
            bbox=[norm[0] * width, norm[1] * height, norm[2] * width, norm[3] * height],
            bbox_norm=norm,
            bbox_source=source,
            html=serialize_children(node, st, tags, attrs).strip(),
            text=node_text(node, st),
        )
        block.markdown = block_markdown(block, node, st)
        if block.text.strip() or block.markdown.strip() or label != "Text":
            page.blocks.append(block)

    pending: list[LexborNode] = []  # nodes outside any layout div, gathered into a Text block

    def flush_pending() -> None:
        if not pending:
            return
        if all(n.tag == "-text" and not (n.text_content or "").strip() for n in pending):
            pending.clear()  # the line breaks between layout divs: no block, and no fragment to parse again
            return
        html = serialize_nodes(pending, store, tags, attrs)
        pending.clear()
        frag, fstore = prepare_fragment(html, tags, attrs)
        if frag is not None and (frag.text(deep=True).strip() or frag.css_first("img, input")):
            add_block("Text", None, frag, fstore)

    # walk the top level; a wrapper element (not a layout div) holding layout divs is descended into
    stack: list[LexborNode] = []
    first = body.child
    if first is not None:
        stack.append(first)
    while stack:
        child = stack.pop()
        if child is None:
            continue
        nxt = child.next
        if nxt is not None:
            stack.append(nxt)
        if _is_layout_div(child):
            flush_pending()
            label = canonical_label(child.attributes.get("data-label"), prof.labels)
            add_block(label, child.attributes.get("data-bbox"), child, store)
        elif _contains_layout_div(child):
            flush_pending()
            if child.child is not None:
                stack.append(child.child)
        else:
            pending.append(child)
    flush_pending()
    if reusable:
        vouch_page(page.blocks)
    if page.blocks and truncated:
        page.blocks[-1].truncated = True
    return page
