"""Reports of an evaluation: a JSON document (every test, every repeat) and a Markdown summary."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from ocrserve.eval.runner import EvalResult, TestResult

REPORT_VERSION = "1"


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "ocrserve": _version("ocrserve"),
        "rapidfuzz": _version("rapidfuzz"),
        "fuzzysearch": _version("fuzzysearch"),
        "katex": "0.19.1",
    }


def _test_json(r: TestResult) -> dict[str, Any]:
    return {
        "id": r.id,
        "type": r.type,
        "file": r.group,
        "pdf": r.pdf,
        "page": r.page,
        "passed": r.passed,
        "skipped": r.skipped,
        "missing": r.missing,
        "score": r.score,
        "expected": r.expected,
        "repeats": [
            {"file": x.file, "passed": x.passed, "explanation": x.explanation, "found": x.found} for x in r.repeats
        ],
    }


def to_json(res: EvalResult, *, command: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "report_version": REPORT_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "bench_dir": res.bench_dir,
        "candidate": res.candidate,
        "environment": environment(),
        "math_renderer": res.math_renderer,
        "complete": res.complete,
        "overall": {
            "score": res.overall,
            "ci_low": res.ci[0],
            "ci_high": res.ci[1],
            "ci_level": res.ci_level,
            "bootstrap_samples": res.n_bootstrap,
            "definition": "mean of the per-file pass rates; a test passes when more than half of its repeats pass",
        },
        "files": {
            g.name: {"pass_rate": g.rate, "passed": g.passed, "total": g.total, "skipped": g.skipped}
            for g in res.groups
        },
        "types": {t: {"average_pass_rate": s, "tests": n} for t, (s, n) in res.by_type.items()},
        "counts": {
            "tests": len(res.results),
            "passed": sum(1 for r in res.results if r.passed),
            "failed": len(res.failed),
            "skipped": len(res.skipped),
        },
        "errors": res.errors,
        "warnings": res.warnings,
        **({"run": extra} if extra else {}),
        "tests": [_test_json(r) for r in res.results],
    }


def _cell(s: str | None, n: int = 140) -> str:
    if not s:
        return ""
    s = " ".join(str(s).split())
    if len(s) > n:
        s = s[: n - 1] + "\u2026"
    return s.replace("|", "\\|").replace("<", "&lt;")


def to_markdown(
    res: EvalResult,
    *,
    title: str = "olmOCR-Bench evaluation",
    command: str | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    env = environment()
    lo, hi = res.ci
    lines = [f"# {title}", ""]
    if command:
        lines += ["Command:", "", "```", command, "```", ""]
    lines += [
        f"- Benchmark: `{res.bench_dir}`",
        f"- Candidate: `{res.candidate}`",
        f"- Math rendering: {res.math_renderer}",
        f"- Versions: ocrserve {env['ocrserve']}, rapidfuzz {env['rapidfuzz']}, fuzzysearch {env['fuzzysearch']}, "
        f"KaTeX {env['katex']}, Python {env['python']} ({env['platform']})",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]
    if extra:
        for k, v in extra.items():
            lines.append(f"- {k}: {v}")
    lines += [
        "",
        f"**Overall score: {res.overall * 100:.1f}%** (mean of per-file pass rates; "
        f"{res.ci_level * 100:.0f}% bootstrap CI {lo * 100:.1f}%-{hi * 100:.1f}%, {res.n_bootstrap} samples)"
        + ("" if res.complete else " - **incomplete: see skipped tests / errors below**"),
        "",
        "| File | Passed | Total | Pass rate | Skipped |",
        "|---|---:|---:|---:|---:|",
    ]
    for g in res.groups:
        lines.append(f"| {g.name} | {g.passed} | {g.total} | {g.rate * 100:.1f}% | {g.skipped} |")
    lines += ["", "| Test type | Average pass rate | Tests |", "|---|---:|---:|"]
    for t, (s, n) in res.by_type.items():
        lines.append(f"| {t} | {s * 100:.1f}% | {n} |")
    if res.errors:
        lines += ["", "## Errors", ""] + [f"- {_cell(e, 300)}" for e in res.errors]
    if res.warnings:
        lines += ["", "## Warnings", ""] + [f"- {_cell(w, 300)}" for w in res.warnings]
    skipped = res.skipped
    if skipped:
        lines += ["", f"## Skipped tests ({len(skipped)})", ""]
        lines += [
            f"- `{r.id}` ({r.type}): {_cell(r.repeats[0].explanation if r.repeats else '', 200)}" for r in skipped
        ]
    failed = res.failed
    lines += ["", f"## Failed tests ({len(failed)})", ""]
    if failed:
        lines += [
            "| Test | Type | PDF (page) | Repeats passed | Expected | Found / why |",
            "|---|---|---|---:|---|---|",
        ]
        for r in failed:
            bad = next((x for x in r.repeats if x.passed is False), None)
            why = bad.explanation if bad else ""
            found = bad.found if bad and bad.found else ""
            judged = r.judged
            lines.append(
                f"| `{r.id}` | {r.type} | {_cell(r.pdf, 60)} ({r.page}) | {sum(1 for x in judged if x.passed)}/{len(judged)} "
                f"| {_cell(r.expected)} | {_cell(why, 100)}{' - found: ' + _cell(found) if found else ''} |"
            )
    lines += [
        "",
        f"## All tests ({len(res.results)})",
        "",
        "| Test | Type | File | Result | Score |",
        "|---|---|---|---|---:|",
    ]
    for r in res.results:
        verdict = "skipped" if r.skipped else ("pass" if r.passed else ("missing" if r.missing else "FAIL"))
        lines.append(f"| `{r.id}` | {r.type} | {r.group} | {verdict} | {r.score:.2f} |")
    return "\n".join(lines) + "\n"


def summary_lines(res: EvalResult) -> list[str]:
    """Short console summary."""
    lo, hi = res.ci
    out = [
        f"Overall: {res.overall * 100:.1f}% (CI {lo * 100:.1f}-{hi * 100:.1f}%) over {len(res.results)} tests"
        + ("" if res.complete else f" [incomplete: {len(res.skipped)} skipped, {len(res.errors)} errors]")
    ]
    for g in res.groups:
        out.append(
            f"  {g.name:30s} {g.rate * 100:5.1f}% ({g.passed}/{g.total}{f', {g.skipped} skipped' if g.skipped else ''})"
        )
    for t, (s, n) in res.by_type.items():
        out.append(f"  type {t:10s} {s * 100:5.1f}% over {n} tests")
    out.append(f"  math: {res.math_renderer}")
    return out
