"""olmOCR-Bench unit tests: present, absent, order, table, math, baseline.

Each test is a pydantic model loaded from one JSONL line (unknown fields are an error, as in the
benchmark) and has ``run(markdown, renderer) -> Outcome``. The matching rules, normalization and
thresholds are those of olmOCR-Bench (allenai/olmocr, Apache-2.0), re-implemented here:

- text is normalized with ``normalize_text`` on both sides;
- present/absent: optional lower-casing (``case_sensitive: false``), then the first ``first_n``
  and/or last ``last_n`` characters only; a candidate shorter than ``len(text) - max_diffs`` fails
  ``present`` and passes ``absent``; otherwise rapidfuzz ``partial_ratio`` against the threshold
  ``1 - max_diffs / len(text)`` (present: ratio >= threshold; absent: ratio < threshold);
- order: fuzzysearch ``find_near_matches`` (Levenshtein distance <= max_diffs) for both strings;
  passes when some match of ``before`` starts before some match of ``after``; ``max_diffs`` may
  not exceed half of either string;
- table: cells of every Markdown (unless ``ignore_markdown_tables``) and HTML table; a cell matches
  with rapidfuzz ``ratio >= max(0.5, 1 - max_diffs / len)`` and every given neighbour (up, down,
  left, right, top_heading, left_heading) must match one of the cells in that direction with the
  same rule;
- baseline: with ``max_length``, passes when the page has at most that many alphanumeric
  characters (optionally not counting Markdown image tags); otherwise the page must have some
  alphanumeric text, must not end with any 1..5-character n-gram repeated more than
  ``max_repeats`` (30) times, and must not contain CJK ideographs, kana or emoji;
- math: formulas are taken from ``\\(..\\)``, ``\\[..\\]``, ``$$..$$`` and ``$..$`` (the last two
  unless ``ignore_dollar_delimited``); a formula identical to the test's passes, else one whose
  KaTeX rendering matches (see mathrender). Without a browser math tests are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, model_validator

from ocrserve.eval.mathrender import MathRenderer, RendererUnavailable, same_rendering
from ocrserve.eval.normalize import normalize_text
from ocrserve.eval.repeats import trailing_repeats
from ocrserve.eval.tables import CellGraph, CellId, parse_html_tables, parse_markdown_tables

TEST_TYPES = ("present", "absent", "order", "table", "math", "baseline")


@dataclass(frozen=True)
class Outcome:
    """Result of one test on one Markdown file. ``passed`` None means skipped (could not be judged)."""

    passed: bool | None
    explanation: str = ""
    found: str | None = None

    @property
    def skipped(self) -> bool:
        return self.passed is None


def _clip(s: str | None, n: int = 160) -> str | None:
    if s is None:
        return None
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _fuzz():
    try:
        from rapidfuzz import fuzz
    except ImportError as e:  # pragma: no cover - the eval extra is missing
        raise RuntimeError("ocrserve eval needs the [eval] extra (rapidfuzz): pip install '.[eval]'") from e
    return fuzz


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pdf: str = Field(min_length=1)
    page: int = Field(ge=1)
    id: str = Field(min_length=1)
    max_diffs: int = Field(0, ge=0)
    checked: Literal["verified", "rejected"] | None = None
    url: str | None = None

    def expected(self) -> str:
        raise NotImplementedError

    def run(self, markdown: str, renderer: MathRenderer | None = None) -> Outcome:
        raise NotImplementedError


class PresenceTest(_Base):
    type: Literal["present", "absent"]
    text: str
    case_sensitive: bool = True
    first_n: int | None = None
    last_n: int | None = None

    _query: str = PrivateAttr("")

    @model_validator(mode="after")
    def _prepare(self) -> PresenceTest:
        self._query = normalize_text(self.text)
        if not self._query.strip():
            raise ValueError("text is empty after normalization")
        return self

    def expected(self) -> str:
        where = ""
        if self.first_n or self.last_n:
            where = f" (in the first {self.first_n or 0} / last {self.last_n or 0} chars)"
        return f"{'present' if self.type == 'present' else 'absent'}: {self._query!r}{where}"

    def run(self, markdown: str, renderer: MathRenderer | None = None) -> Outcome:
        fuzz = _fuzz()
        query = self._query
        content = normalize_text(markdown)
        if not self.case_sensitive:
            query, content = query.lower(), content.lower()
        if self.first_n and self.last_n:
            content = content[: self.first_n] + content[-self.last_n :]
        elif self.first_n:
            content = content[: self.first_n]
        elif self.last_n:
            content = content[-self.last_n :]
        need = len(query) - self.max_diffs
        if len(content) < need:
            if self.type == "present":
                return Outcome(
                    False,
                    f"candidate too short ({len(content)} chars) to contain the text (needs >= {need})",
                    _clip(content),
                )
            return Outcome(True)
        threshold = 1.0 - self.max_diffs / len(query)
        al = fuzz.partial_ratio_alignment(query, content)
        ratio = (al.score if al else 0.0) / 100.0
        found = _clip(content[al.dest_start : al.dest_end]) if al else None
        if self.type == "present":
            if ratio >= threshold:
                return Outcome(True, found=found)
            return Outcome(False, f"best match ratio {ratio:.3f} < threshold {threshold:.3f}", found)
        if ratio < threshold:
            return Outcome(True, found=found)
        return Outcome(False, f"text found: match ratio {ratio:.3f} >= threshold {threshold:.3f}", found)


class OrderTest(_Base):
    type: Literal["order"]
    before: str
    after: str

    _before: str = PrivateAttr("")
    _after: str = PrivateAttr("")

    @model_validator(mode="after")
    def _prepare(self) -> OrderTest:
        self._before, self._after = normalize_text(self.before), normalize_text(self.after)
        if not self._before.strip():
            raise ValueError("before is empty after normalization")
        if not self._after.strip():
            raise ValueError("after is empty after normalization")
        if self.max_diffs > len(self._before) // 2 or self.max_diffs > len(self._after) // 2:
            raise ValueError("max_diffs is more than half of the before/after text")
        return self

    def expected(self) -> str:
        return f"{self._before!r} before {self._after!r}"

    def run(self, markdown: str, renderer: MathRenderer | None = None) -> Outcome:
        from fuzzysearch import find_near_matches

        content = normalize_text(markdown)
        before = find_near_matches(self._before, content, max_l_dist=self.max_diffs)
        after = find_near_matches(self._after, content, max_l_dist=self.max_diffs)
        if not before:
            return Outcome(False, f"'before' text not found within {self.max_diffs} edits")
        if not after:
            return Outcome(False, f"'after' text not found within {self.max_diffs} edits")
        first_before = min(m.start for m in before)
        last_after = max(m.start for m in after)
        found = f"'before' at {sorted(m.start for m in before)}, 'after' at {sorted(m.start for m in after)}"
        if first_before < last_after:
            return Outcome(True, found=found)
        return Outcome(False, "'before' text does not come before 'after' text", found)


class TableTest(_Base):
    type: Literal["table"]
    cell: str
    up: str = ""
    down: str = ""
    left: str = ""
    right: str = ""
    top_heading: str = ""
    left_heading: str = ""
    ignore_markdown_tables: bool = False

    _norm: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _prepare(self) -> TableTest:
        self._norm = {
            k: normalize_text(getattr(self, k))
            for k in ("cell", "up", "down", "left", "right", "top_heading", "left_heading")
        }
        return self

    def _threshold(self, s: str) -> float:
        return max(0.5, 1.0 - self.max_diffs / (len(s) if s else 1))

    def expected(self) -> str:
        rel = ", ".join(f"{k}={v!r}" for k, v in self._norm.items() if k != "cell" and v)
        return f"cell {self._norm['cell']!r}" + (f" with {rel}" if rel else "")

    def run(self, markdown: str, renderer: MathRenderer | None = None) -> Outcome:
        fuzz = _fuzz()
        tables: list[CellGraph] = []
        if not self.ignore_markdown_tables:
            tables += parse_markdown_tables(markdown)
        tables += parse_html_tables(markdown)
        if not tables:
            return Outcome(False, "no tables found")
        target = self._norm["cell"]
        threshold = self._threshold(target)
        reasons: list[str] = []
        best_cell: tuple[float, str] = (0.0, "")
        for table in tables:
            texts = {cid: normalize_text(t) for cid, t in table.cells.items()}
            matches = []
            for cid, text in texts.items():
                sim = fuzz.ratio(target, text) / 100.0
                if sim > best_cell[0]:
                    best_cell = (sim, text)
                if sim >= threshold:
                    matches.append(cid)
            walks = {
                "up": lambda c, t=table: t.up[c],
                "down": lambda c, t=table: t.down[c],
                "left": lambda c, t=table: t.left[c],
                "right": lambda c, t=table: t.right[c],
                "left_heading": lambda c, t=table: t.left_headings(c),
                "top_heading": lambda c, t=table: t.top_headings(c),
            }
            for cid in matches:
                failed = []
                for key in ("up", "down", "left", "right", "left_heading", "top_heading"):
                    want = self._norm[key]
                    if not want:
                        continue
                    ok, best = self._relation_ok(want, walks[key](cid), texts, fuzz)
                    if not ok:
                        failed.append(f"{key}: expected {want!r}, best {best[1]!r} ({best[0]:.2f})")
                if not failed:
                    return Outcome(True, found=f"cell {texts[cid]!r} at {cid}")
                reasons.append(f"cell {texts[cid]!r} at {cid}: " + "; ".join(failed))
        if not reasons:
            return Outcome(
                False,
                f"no cell matches {target!r} (threshold {threshold:.2f})",
                f"closest cell {best_cell[1]!r} ({best_cell[0]:.2f})" if best_cell[1] else None,
            )
        return Outcome(False, "matching cell found but neighbours differ", _clip(" | ".join(reasons), 400))

    def _relation_ok(
        self, want: str, cells: set[CellId], texts: dict[CellId, str], fuzz
    ) -> tuple[bool, tuple[float, str | None]]:
        best: tuple[float, str | None] = (0.0, None)
        ok = False
        for cid in cells:
            sim = fuzz.ratio(want, texts[cid]) / 100.0
            if sim > best[0]:
                best = (sim, texts[cid])
            if sim >= self._threshold(want):
                ok = True
        return ok, best


_DISALLOWED = re.compile(
    "["
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana
    "\U0001f600-\U0001f64f"  # emoticons
    "\U0001f300-\U0001f5ff"  # symbols and pictographs
    "\U0001f680-\U0001f6ff"  # transport and map symbols
    "\U0001f1e0-\U0001f1ff"  # regional indicators (flags)
    "]"
)
_IMAGE_TAG = re.compile(r"!\[.*?\]\(.*?\)")


class BaselineTest(_Base):
    type: Literal["baseline"]
    max_length: int | None = None
    max_length_skips_image_alt_tags: bool = False
    max_repeats: int = 30
    check_disallowed_characters: bool = True

    def expected(self) -> str:
        if self.max_length is not None:
            return f"blank page: at most {self.max_length} alphanumeric characters"
        return f"non-empty text, no n-gram repeated > {self.max_repeats} times at the end, no CJK/emoji"

    def run(self, markdown: str, renderer: MathRenderer | None = None) -> Outcome:
        alnum = sum(1 for c in markdown if c.isalnum())
        if self.max_length is not None:
            if self.max_length_skips_image_alt_tags:
                alnum = sum(1 for c in _IMAGE_TAG.sub("", markdown) if c.isalnum())
            if alnum > self.max_length:
                return Outcome(
                    False, f"{alnum} alphanumeric characters on a page expected to be blank", _clip(markdown.strip())
                )
            return Outcome(True)
        if alnum == 0:
            return Outcome(False, "no alphanumeric characters", _clip(markdown))
        for n, count in enumerate(trailing_repeats(markdown, 5), start=1):
            if count > self.max_repeats:
                return Outcome(False, f"text ends with {count} repeats of a {n}-gram", _clip(markdown[-80:]))
        bad = _DISALLOWED.findall(markdown)
        if self.check_disallowed_characters and bad:
            return Outcome(False, f"disallowed characters {''.join(dict.fromkeys(bad))[:20]!r}", None)
        return Outcome(True)


_MATH_DELIMS = [re.compile(r"\\\((.+?)\\\)", re.DOTALL), re.compile(r"\\\[(.+?)\\\]", re.DOTALL)]
_DOLLAR_DELIMS = [re.compile(r"\$\$(.+?)\$\$", re.DOTALL), re.compile(r"\$(.+?)\$", re.DOTALL)]


def extract_formulas(markdown: str, *, dollars: bool = True) -> list[str]:
    """Formulas of a page, delimiter kinds taken in turn (each kind removed before the next)."""
    found: list[str] = []
    rest = markdown
    for pattern in _MATH_DELIMS + (_DOLLAR_DELIMS if dollars else []):
        found += [m.strip() for m in pattern.findall(rest)]
        rest = pattern.sub("", rest)
    return found


class MathTest(_Base):
    type: Literal["math"]
    math: str
    ignore_dollar_delimited: bool = False

    @model_validator(mode="after")
    def _prepare(self) -> MathTest:
        if not self.math.strip():
            raise ValueError("math is empty")
        return self

    def expected(self) -> str:
        return f"formula {self.math!r}"

    def formulas(self, markdown: str) -> list[str]:
        return extract_formulas(markdown, dollars=not self.ignore_dollar_delimited)

    def candidates_to_render(self, markdown: str) -> list[str]:
        """Formulas that would need rendering (none when one is identical to the test's)."""
        eqs = self.formulas(markdown)
        return [] if self.math in eqs else eqs

    def run(self, markdown: str, renderer: MathRenderer | None = None) -> Outcome:
        if renderer is None or not renderer.available:
            why = renderer.reason if renderer is not None else "math rendering disabled"
            return Outcome(None, f"skipped: {why}")
        eqs = self.formulas(markdown)
        fuzz = _fuzz()
        closest = max(eqs, key=lambda e: fuzz.ratio(e, self.math), default=None)
        try:
            reference = renderer.render(self.math)
            if not reference.ok:
                return Outcome(None, f"skipped: the reference formula does not render ({reference.error})")
            if self.math in eqs:
                return Outcome(True, found=_clip(self.math))
            for eq in sorted(eqs, key=lambda e: -fuzz.ratio(e, self.math)):
                hyp = renderer.render(eq)
                if hyp.ok and same_rendering(reference, hyp):
                    return Outcome(True, found=_clip(eq))
        except RendererUnavailable as e:
            return Outcome(None, f"skipped: {e}")
        if not eqs:
            return Outcome(False, "no formulas in the page")
        return Outcome(
            False, f"no formula renders like the reference ({len(eqs)} formulas)", _clip(f"closest: {closest}")
        )


BenchTest = Annotated[PresenceTest | OrderTest | TableTest | BaselineTest | MathTest, Field(discriminator="type")]
_ADAPTER: TypeAdapter = TypeAdapter(BenchTest)


def parse_test(data: dict) -> PresenceTest | OrderTest | TableTest | BaselineTest | MathTest:
    """One test from its JSON object (pydantic ValidationError on bad input)."""
    if not isinstance(data, dict):
        raise ValueError(f"a test must be a JSON object, got {type(data).__name__}")
    t = data.get("type")
    if t not in TEST_TYPES:
        raise ValueError(f"unknown test type {t!r} (supported: {', '.join(TEST_TYPES)})")
    return _ADAPTER.validate_python(data)
