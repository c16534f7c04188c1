"""Scoring a candidate folder against a benchmark: repeats, per-file and overall scores, CIs.

- A test is run on each repeat file of its page; its score is the fraction of repeats passed and
  it passes when that fraction is above one half. A missing page fails the test.
- A JSONL file's score is the fraction of its tests that pass; the overall score is the mean of
  the per-file scores (the default baseline tests form their own group, "baseline").
- Per test type: the mean of the tests' repeat fractions (as olmOCR-Bench reports it).
- Confidence interval: percentile bootstrap of the overall score, resampling the pass/fail of
  tests within each file independently (``n_bootstrap`` draws, seeded).
- Skipped tests (math without a browser, a reference formula that does not render) are left out
  of every score and counted separately; a run with skipped tests is marked incomplete.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ocrserve.eval.bench import Bench, candidate_files
from ocrserve.eval.mathrender import MathRenderer, RendererUnavailable
from ocrserve.eval.tests import MathTest, Outcome

log = logging.getLogger(__name__)


@dataclass
class RepeatResult:
    file: str
    passed: bool | None
    explanation: str = ""
    found: str | None = None


@dataclass
class TestResult:
    id: str
    type: str
    group: str
    pdf: str
    page: int
    expected: str
    repeats: list[RepeatResult] = field(default_factory=list)
    missing: bool = False

    @property
    def judged(self) -> list[RepeatResult]:
        return [r for r in self.repeats if r.passed is not None]

    @property
    def skipped(self) -> bool:
        return not self.missing and not self.judged

    @property
    def score(self) -> float:
        """Fraction of the judged repeats that passed (0 for a missing page)."""
        j = self.judged
        return sum(1 for r in j if r.passed) / len(j) if j else 0.0

    @property
    def passed(self) -> bool | None:
        if self.skipped:
            return None
        return self.score > 0.5


@dataclass
class GroupScore:
    name: str
    passed: int
    total: int
    skipped: int

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


@dataclass
class EvalResult:
    bench_dir: str
    candidate: str
    results: list[TestResult]
    groups: list[GroupScore]
    overall: float
    ci: tuple[float, float]
    ci_level: float
    n_bootstrap: int
    by_type: dict[str, tuple[float, int]]
    errors: list[str]
    warnings: list[str]
    math_renderer: str

    @property
    def skipped(self) -> list[TestResult]:
        return [r for r in self.results if r.skipped]

    @property
    def failed(self) -> list[TestResult]:
        return [r for r in self.results if r.passed is False]

    @property
    def complete(self) -> bool:
        return not self.skipped and not self.errors


def bootstrap_ci(
    groups: list[list[float]], *, n_bootstrap: int = 1000, ci_level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile CI of the mean of per-group means, resampling within each group."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays or n_bootstrap <= 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = np.zeros(n_bootstrap)
    for g in arrays:
        idx = rng.integers(0, len(g), size=(n_bootstrap, len(g)))
        means += g[idx].mean(axis=1)
    means /= len(arrays)
    alpha = (1.0 - ci_level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def _prefetch_math(tests: list, texts: dict[tuple[str, int], list[tuple[str, str]]], renderer: MathRenderer) -> None:
    formulas: list[str] = []
    for t in tests:
        if not isinstance(t, MathTest):
            continue
        formulas.append(t.math)
        for _, md in texts.get((t.pdf, t.page), []):
            formulas += t.candidates_to_render(md)
    if formulas:
        try:
            renderer.render_many(formulas)
        except RendererUnavailable as e:
            log.warning("math rendering unavailable: %s", e)


def evaluate(
    bench: Bench,
    candidate: Path,
    *,
    renderer: MathRenderer | None = None,
    n_bootstrap: int = 1000,
    ci_level: float = 0.95,
    seed: int = 0,
) -> EvalResult:
    """Run every test of ``bench`` on the Markdown files of ``candidate``."""
    candidate = Path(candidate)
    if not candidate.is_dir():
        raise ValueError(f"{candidate}: candidate folder does not exist")
    files = candidate_files(candidate, bench.pdfs + sorted({t.pdf for t in bench.tests} - set(bench.pdfs)))
    errors: list[str] = []
    texts: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for key, paths in files.items():
        for p in paths:
            try:
                texts.setdefault(key, []).append((p.relative_to(candidate).as_posix(), p.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as e:
                errors.append(f"{p}: cannot be read ({e})")
    if renderer is not None and renderer.available:
        _prefetch_math(bench.tests, texts, renderer)

    results: list[TestResult] = []
    missing_pages: set[tuple[str, int]] = set()
    for t in bench.tests:
        res = TestResult(
            id=t.id, type=t.type, group=bench.group_of[t.id], pdf=t.pdf, page=t.page, expected=t.expected()
        )
        pages = texts.get((t.pdf, t.page))
        if not pages:
            res.missing = True
            missing_pages.add((t.pdf, t.page))
            res.repeats.append(RepeatResult(file="", passed=False, explanation="missing Markdown for this page"))
        else:
            for name, md in pages:
                try:
                    out: Outcome = t.run(md, renderer)
                except Exception as e:
                    log.exception("test %s crashed on %s", t.id, name)
                    out = Outcome(False, f"error running the test: {e}")
                res.repeats.append(
                    RepeatResult(file=name, passed=out.passed, explanation=out.explanation, found=out.found)
                )
        results.append(res)
    for pdf, page in sorted(missing_pages):
        errors.append(f"missing {pdf} page {page} (expected {candidate}/<name>_pg{page}_repeat<R>.md)")

    groups: list[GroupScore] = []
    group_scores: list[list[float]] = []
    for name in bench.groups:
        members = [r for r in results if r.group == name]
        judged = [r for r in members if not r.skipped]
        groups.append(GroupScore(name, sum(1 for r in judged if r.passed), len(judged), len(members) - len(judged)))
        group_scores.append([1.0 if r.passed else 0.0 for r in judged])
    scored = [g for g in groups if g.total]
    overall = sum(g.rate for g in scored) / len(scored) if scored else 0.0
    ci = bootstrap_ci(group_scores, n_bootstrap=n_bootstrap, ci_level=ci_level, seed=seed)
    by_type: dict[str, tuple[float, int]] = {}
    for ttype in sorted({r.type for r in results}):
        scores = [r.score for r in results if r.type == ttype and not r.skipped]
        by_type[ttype] = (sum(scores) / len(scores) if scores else 0.0, len(scores))
    if renderer is None:
        rinfo = "disabled"
    elif renderer.available:
        rinfo = f"KaTeX in {getattr(renderer, 'version', '') or 'headless browser'}"
    else:
        rinfo = f"unavailable: {renderer.reason}"
    return EvalResult(
        bench_dir=str(bench.root),
        candidate=str(candidate),
        results=results,
        groups=groups,
        overall=overall,
        ci=ci,
        ci_level=ci_level,
        n_bootstrap=n_bootstrap,
        by_type=by_type,
        errors=errors,
        warnings=list(bench.warnings),
        math_renderer=rinfo,
    )
