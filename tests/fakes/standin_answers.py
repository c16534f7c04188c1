"""The stand-in vLLM server's canned answers: a deterministic Chandra-1 raw output derived from the image, and
the answer for each cue (loop, cutoff, huge, garbage, ok)."""

from __future__ import annotations

import hashlib
import io

from tests.fakes.standin_config import CHARS_PER_TOKEN

# -------------------------------------------------------------------------------- canned answers

_WORDS = (
    "revenue grew across every region while operating costs fell in the second half as the new "
    "plant reached full capacity and the board approved a dividend for the fiscal year under "
    "review with net income rising on higher volumes and stable prices in the core markets"
).split()


def _sentence(seed: bytes, n: int) -> str:
    words = [_WORDS[b % len(_WORDS)] for b in seed[:n]]
    return (" ".join(words)).capitalize() + "."


def chandra_output(sha: str, width: int, height: int) -> str:
    """The stand-in's answer for an image: realistic Chandra-1 layout blocks, unique per image."""
    seed = bytes.fromhex(sha)
    paras = 1 + seed[0] % 3
    blocks = [f'<div data-bbox="[62, 40, 958, 88]" data-label="Section-Header"><h1>Page {sha[:12]}</h1></div>']
    y = 102
    for i in range(paras):
        text = _sentence(seed[i * 8 :], 16) + " " + _sentence(seed[i * 8 + 3 :], 12)
        blocks.append(
            f'<div data-bbox="[62, {y}, 958, {y + 60}]" data-label="Text"><p>{text} '
            f"<b>{seed[i] % 50 + 1}%</b> for image {width}x{height}.</p></div>"
        )
        y += 72
    blocks.append(
        f'<div data-bbox="[62, {y}, 958, {y + 200}]" data-label="Table"><table>'
        "<tr><th>Quarter</th><th>Revenue</th><th>Margin</th></tr>"
        + "".join(
            f"<tr><td>Q{q + 1}</td><td>{int.from_bytes(seed[q * 2 : q * 2 + 2], 'big')}</td>"
            f"<td>{seed[20 + q] % 40}%</td></tr>"
            for q in range(4)
        )
        + "</table></div>"
    )
    y += 216
    blocks.append(
        f'<div data-bbox="[62, {y}, 500, {y + 24}]" data-label="Text"><p>Inline '
        f"<math>x_{{n}} = {int(sha[:4], 16)}</math> and a box "
        '<input type="checkbox" checked> done</p></div>'
    )
    y += 40
    blocks.append(
        f'<div data-bbox="[120, {y}, 880, {min(y + 250, 1000)}]" data-label="Image">'
        f'<img alt="Bar chart of revenue by quarter for page {sha[:12]}"/></div>'
    )
    return "\n".join(blocks)


def expected_output(image_bytes: bytes) -> str:
    """What the stand-in answers ("ok", default max_tokens) for these encoded image bytes."""
    from PIL import Image

    with Image.open(io.BytesIO(image_bytes)) as im:
        w, h = im.size
    return chandra_output(hashlib.sha256(image_bytes).hexdigest(), w, h)


def _filler(sha: str, start: int, need: int) -> str:
    """Varied Text blocks (never a loop) to make an ignore_eos answer exactly as long as asked."""
    out, i, size = [], start, 0
    seed = bytes.fromhex(sha)
    while size < need:
        b = (
            f'\n<div data-bbox="[62, 900, 958, 960]" data-label="Text"><p>Paragraph {i}: '
            + _sentence(seed[i % 24 :] + seed, 14)
            + "</p></div>"
        )
        out.append(b)
        size += len(b)
        i += 1
    return "".join(out)[:need]


def make_answer(
    step: str, sha: str, width: int, height: int, max_tokens: int, ignore_eos: bool, huge_chars: int = 2_000_000
) -> tuple[str, str]:
    """(content, finish_reason) for one attempt."""
    limit = max_tokens * CHARS_PER_TOKEN
    ok = chandra_output(sha, width, height)
    if step == "loop":
        head = ok.split("\n")[0] + '\n<div data-bbox="[62, 102, 958, 900]" data-label="Text"><p>'
        unit = "the same words again "
        body = head + unit * (limit // len(unit) + 1)
        return body[:limit], "length"
    if step == "cutoff":
        cut = ok.rfind("\n") + 1 + (len(ok) - ok.rfind("\n")) // 2
        text = ok[: min(cut, limit)]
        return text, "length"
    if step == "huge":
        return (ok + _filler(sha, 1, huge_chars - len(ok)))[:huge_chars], "stop"
    if step == "garbage":
        text = "I am unable to read this page. " + " ".join(sha[i : i + 5] for i in range(0, 40, 5)) + " @@ ## %%"
        return text[:limit], "stop" if len(text) <= limit else "length"
    # ok
    if ignore_eos:
        if len(ok) < limit:
            ok = ok + _filler(sha, 1, limit - len(ok))
        return ok[:limit], "length"
    if len(ok) > limit:
        return ok[:limit], "length"
    return ok, "stop"
