"""Render LaTeX with KaTeX in headless Chromium and compare the layouts of two formulas.

olmOCR-Bench math tests pass when a formula of the candidate renders like the reference: either
the reference's MathML (annotation removed, whitespace dropped) is contained in the candidate's,
or every rendered glyph of the reference can be mapped to a glyph of the candidate with the same
character such that each glyph's nearest neighbours up/down/left/right (centres aligned within
5 px) map to the corresponding neighbours. Rendering: KaTeX display mode, 24 px, no KaTeX fonts
(the benchmark's renderer injects the stylesheet inline, so its font URLs never load either).

Chromium is driven with ``--headless --dump-dom`` on one generated page per batch of formulas: the
page renders every formula, measures the innermost spans and writes the results into the DOM.
No browser means no rendering: ``ChromiumKatex.available`` is False and math tests are skipped.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

from ocrserve.errors import OcrserveError

log = logging.getLogger(__name__)

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FONT_SIZE_PX = 24
NEIGHBOUR_TOLERANCE_PX = 5.0
#: backtracking steps before a glyph matching is given up as "no match"
MATCH_BUDGET = 200_000


@dataclass(frozen=True)
class Glyph:
    text: str
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


@dataclass(frozen=True)
class Rendered:
    """A rendered formula: KaTeX's MathML and its innermost text spans with their boxes."""

    mathml: str
    glyphs: tuple[Glyph, ...]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class MathRenderer(Protocol):
    available: bool
    reason: str

    def render_many(self, formulas: Iterable[str]) -> None: ...

    def render(self, formula: str) -> Rendered: ...


class RendererUnavailable(OcrserveError, RuntimeError):
    pass


def find_browser(explicit: str | None = None) -> str | None:
    """Path of a Chromium-family browser: ``explicit``, else the first of BROWSER_NAMES on PATH."""
    if explicit:
        path = shutil.which(explicit) or (explicit if Path(explicit).exists() else None)
        return path
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _asset(name: str) -> str:
    return resources.files("ocrserve.eval").joinpath("katex").joinpath(name).read_text(encoding="utf-8")


_PAGE_SCRIPT = r"""
const formulas = JSON.parse(document.getElementById('formulas').textContent);
const boxes = [];
for (const f of formulas) {
  const outer = document.createElement('div');
  outer.className = 'outer';
  const inner = document.createElement('div');
  inner.className = 'eq';
  outer.appendChild(inner);
  document.body.appendChild(outer);
  let error = null;
  try { katex.render(f, inner, {displayMode: true, throwOnError: true}); }
  catch (e) { error = String((e && e.message) || e); }
  boxes.push([inner, error]);
}
const results = boxes.map(([inner, error]) => {
  if (error !== null) return {error: error};
  const glyphs = [];
  for (const s of inner.querySelectorAll('span')) {
    if (s.children.length === 0 && /\S/.test(s.textContent)) {
      const r = s.getBoundingClientRect();
      glyphs.push([s.textContent.trim(), r.x, r.y, r.width, r.height]);
    }
  }
  const m = inner.querySelector('.katex-mathml math');
  return {mathml: m ? m.outerHTML : '', glyphs: glyphs};
});
document.getElementById('out').textContent =
  btoa(unescape(encodeURIComponent(JSON.stringify(results))));
"""


def _page_html(formulas: list[str]) -> str:
    css = re.sub(r"@font-face\{[^}]*\}", "", _asset("katex.min.css"))
    data = json.dumps(formulas).replace("</", "<\\/")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<style>{css}</style>"
        "<style>body{margin:0;background:white;color:black}"
        ".outer{display:flex;justify-content:center;width:800px;margin:0 0 40px 0}"
        f".eq{{padding:0;font-size:{FONT_SIZE_PX}px}}</style></head><body>"
        f"<script id='formulas' type='application/json'>{data}</script>"
        f"<script>{_asset('katex.min.js')}</script>"
        "<div id='out'></div>"
        f"<script>{_PAGE_SCRIPT}</script></body></html>"
    )


_OUT = re.compile(r"<div id=\"out\">([A-Za-z0-9+/=]*)</div>")


class ChromiumKatex:
    """KaTeX rendering through a headless Chromium, with an in-memory cache per formula."""

    def __init__(self, browser: str | None = None, *, batch_size: int = 250, timeout_s: float = 180.0) -> None:
        self.browser = find_browser(browser)
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self._cache: dict[str, Rendered] = {}
        self.available = self.browser is not None
        self.reason = (
            ""
            if self.available
            else (
                f"no headless browser found (tried {browser!r})"
                if browser
                else f"no headless browser found on PATH (tried {', '.join(BROWSER_NAMES)})"
            )
        )
        self.version = ""
        if self.browser is not None:  # available
            try:
                out = subprocess.run([self.browser, "--version"], capture_output=True, text=True, timeout=30)
                self.version = out.stdout.strip()
            except (OSError, subprocess.SubprocessError) as e:
                self.available, self.reason = False, f"browser {self.browser} does not start: {e}"

    def render_many(self, formulas: Iterable[str]) -> None:
        """Render every formula not cached yet (in batches, one browser run per batch)."""
        todo = list(dict.fromkeys(f for f in formulas if f not in self._cache))
        if not todo:
            return
        if not self.available:
            raise RendererUnavailable(self.reason)
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i : i + self.batch_size]
            for formula, rendered in zip(chunk, self._run_browser(chunk)):
                self._cache[formula] = rendered

    def render(self, formula: str) -> Rendered:
        if formula not in self._cache:
            self.render_many([formula])
        return self._cache[formula]

    def _run_browser(self, formulas: list[str]) -> list[Rendered]:
        assert self.browser is not None
        with tempfile.TemporaryDirectory(prefix="ocrserve-katex-") as tmp:
            page = Path(tmp) / "render.html"
            page.write_text(_page_html(formulas), encoding="utf-8")
            cmd = [
                self.browser,
                "--headless",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--hide-scrollbars",
                f"--user-data-dir={tmp}/profile",
                "--window-size=1000,800",
                "--dump-dom",
                page.as_uri(),
            ]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                cmd.insert(1, "--no-sandbox")
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s)
            except subprocess.TimeoutExpired as e:
                raise RendererUnavailable(
                    f"{self.browser} timed out after {self.timeout_s:.0f}s rendering {len(formulas)} formulas"
                ) from e
            except OSError as e:
                raise RendererUnavailable(f"{self.browser} could not be run: {e}") from e
        m = _OUT.search(proc.stdout)
        if not m or not m.group(1):
            tail = (proc.stderr or "").strip().splitlines()[-3:]
            raise RendererUnavailable(f"{self.browser} rendered nothing (exit {proc.returncode}): {' | '.join(tail)}")
        results = json.loads(base64.b64decode(m.group(1)).decode("utf-8"))
        if len(results) != len(formulas):
            raise RendererUnavailable(f"{self.browser} returned {len(results)} renders for {len(formulas)} formulas")
        out = []
        for r in results:
            if r.get("error") is not None:
                out.append(Rendered(mathml="", glyphs=(), error=r["error"]))
            else:
                out.append(
                    Rendered(mathml=r["mathml"], glyphs=tuple(Glyph(t, x, y, w, h) for t, x, y, w, h in r["glyphs"]))
                )
        return out


# ---------------------------------------------------------------------------------- comparison

_SEMANTICS = re.compile(r"<semantics[^>]*>(.*)</semantics>", re.DOTALL)
_ANNOTATION = re.compile(r"<annotation[\s>].*?</annotation>", re.DOTALL)
_WS = re.compile(r"\s+")


def _mathml_core(mathml: str) -> str:
    m = _SEMANTICS.search(mathml)
    body = _ANNOTATION.sub("", m.group(1)) if m else mathml
    return _WS.sub("", body)


def _split_glyphs(glyphs: Iterable[Glyph]) -> list[Glyph]:
    """One glyph per character, the span's box cut into equal-width slices; zero-width spaces dropped."""
    out = []
    for g in glyphs:
        if g.text == "\u200b":
            continue
        n = len(g.text)
        for k, ch in enumerate(g.text):
            out.append(Glyph(ch, g.x + g.w * k / n, g.y, g.w / n, g.h))
    return out


def _neighbours(glyphs: list[Glyph], tol: float = NEIGHBOUR_TOLERANCE_PX) -> list[dict[str, int | None]]:
    result = []
    for i, g in enumerate(glyphs):
        best: dict[str, tuple[float, int] | None] = {"up": None, "down": None, "left": None, "right": None}
        for j, o in enumerate(glyphs):
            if i == j:
                continue
            dx, dy = o.cx - g.cx, o.cy - g.cy
            cands = []
            if abs(dx) <= tol and dy < 0:
                cands.append(("up", -dy))
            if abs(dx) <= tol and dy > 0:
                cands.append(("down", dy))
            if abs(dy) <= tol and dx < 0:
                cands.append(("left", -dx))
            if abs(dy) <= tol and dx > 0:
                cands.append(("right", dx))
            for d, dist in cands:
                cur = best[d]
                if cur is None or dist < cur[0]:
                    best[d] = (dist, j)
        result.append({d: (v[1] if v else None) for d, v in best.items()})
    return result


def same_rendering(reference: Rendered, candidate: Rendered, *, budget: int = MATCH_BUDGET) -> bool:
    """True when ``candidate`` renders ``reference`` (MathML containment, else glyph-layout embedding)."""
    if not reference.ok or not candidate.ok:
        return False
    if _mathml_core(reference.mathml) in _mathml_core(candidate.mathml):
        return True
    ref = _split_glyphs(reference.glyphs)
    hyp = _split_glyphs(candidate.glyphs)
    options = []
    for g in ref:
        same = [j for j, h in enumerate(hyp) if h.text == g.text]
        if not same:
            return False
        options.append(same)
    ref_nb = _neighbours(ref)
    hyp_nb = _neighbours(hyp)
    assigned: dict[int, int] = {}
    taken = [False] * len(hyp)
    steps = 0

    def place(i: int) -> bool:
        nonlocal steps
        if i == len(ref):
            return True
        for j in options[i]:
            steps += 1
            if steps > budget:
                return False
            if taken[j]:
                continue
            ok = True
            for d in ("up", "down", "left", "right"):
                rn = ref_nb[i][d]
                if rn is None:
                    continue
                hn = hyp_nb[j][d]
                if hn is None:
                    ok = False
                elif rn in assigned:
                    ok = assigned[rn] == hn
                else:
                    ok = hyp[hn].text == ref[rn].text
                if not ok:
                    break
            if not ok:
                continue
            assigned[i] = j
            taken[j] = True
            if place(i + 1):
                return True
            taken[j] = False
            del assigned[i]
        return False

    matched = place(0)
    if steps > budget:
        log.warning("glyph matching gave up after %d steps (%d reference glyphs)", budget, len(ref))
    return matched
