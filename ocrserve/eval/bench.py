"""Loading an olmOCR-Bench folder: its JSONL test files, its PDFs, and a candidate's Markdown files.

Layout (as in allenai/olmOCR-bench): ``BENCH_DIR/*.jsonl`` (one file per category), PDFs under
``BENCH_DIR/pdfs/`` (subfolders allowed; a test's ``pdf`` is the path relative to ``pdfs/``), and a
candidate folder with ``<pdf path without .pdf>_pg<N>_repeat<R>.md`` for each tested page.
Every PDF that has no baseline test gets a default one (page 1) in the extra group "baseline".
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ocrserve.errors import OcrserveError
from ocrserve.eval.tests import BaselineTest, parse_test

log = logging.getLogger(__name__)

BASELINE_GROUP = "baseline"


class BenchError(OcrserveError, ValueError):
    """The benchmark folder or a test file is not usable (the message names the file and the reason)."""


@dataclass
class Bench:
    root: Path
    tests: list = field(default_factory=list)  # all tests, in file order
    group_of: dict[str, str] = field(default_factory=dict)  # test id -> JSONL file name (or "baseline")
    pdfs: list[str] = field(default_factory=list)  # PDF paths relative to pdfs/, posix style
    warnings: list[str] = field(default_factory=list)

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(self.group_of[t.id] for t in self.tests))

    def tested_pages(self) -> dict[str, list[int]]:
        pages: dict[str, set[int]] = {}
        for t in self.tests:
            pages.setdefault(t.pdf, set()).add(t.page)
        return {pdf: sorted(p) for pdf, p in pages.items()}


def load_jsonl(path: Path) -> list:
    tests = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
        try:
            tests.append(parse_test(data))
        except ValidationError as e:
            errs = "; ".join(
                f"{'.'.join(str(x) for x in err['loc'][1:]) or 'test'}: {err['msg']}" for err in e.errors()
            )
            raise BenchError(f"{path}:{lineno}: invalid test {data.get('id', '?')!r}: {errs}") from None
        except ValueError as e:
            raise BenchError(f"{path}:{lineno}: invalid test {data.get('id', '?')!r}: {e}") from None
    return tests


def load_bench(root: Path, *, skip_baseline: bool = False, check_pages: bool = True) -> Bench:
    """Read every ``*.jsonl`` of ``root`` and list ``root/pdfs``; add the default baseline tests."""
    root = Path(root)
    if not root.is_dir():
        raise BenchError(f"{root}: not a folder")
    jsonls = sorted(root.glob("*.jsonl"))
    if not jsonls:
        raise BenchError(f"{root}: no .jsonl test files")
    pdf_dir = root / "pdfs"
    if not pdf_dir.is_dir():
        raise BenchError(f"{root}: no pdfs/ folder")
    bench = Bench(root=root)
    bench.pdfs = sorted(p.relative_to(pdf_dir).as_posix() for p in pdf_dir.rglob("*.pdf"))
    if not bench.pdfs:
        raise BenchError(f"{pdf_dir}: no PDF files")
    for path in jsonls:
        for t in load_jsonl(path):
            if t.id in bench.group_of:
                raise BenchError(f"{path}: duplicate test id {t.id!r}")
            bench.tests.append(t)
            bench.group_of[t.id] = path.name
    known = set(bench.pdfs)
    for t in bench.tests:
        if t.pdf not in known:
            bench.warnings.append(f"test {t.id} names {t.pdf}, which is not under pdfs/")
    with_baseline = {t.pdf for t in bench.tests if t.type == "baseline"}
    for pdf in bench.pdfs:
        if pdf not in with_baseline:
            t = BaselineTest(pdf=pdf, page=1, id=f"{pdf}_baseline", type="baseline")
            bench.tests.append(t)
            bench.group_of[t.id] = BASELINE_GROUP
    if skip_baseline:
        bench.tests = [t for t in bench.tests if t.type != "baseline"]
    if check_pages:
        bench.warnings += _untested_pages(pdf_dir, bench)
    return bench


def _untested_pages(pdf_dir: Path, bench: Bench) -> list[str]:
    try:
        import pypdfium2 as pdfium
    except ImportError:  # pragma: no cover
        return []
    tested = bench.tested_pages()
    out = []
    for pdf in bench.pdfs:
        try:
            doc = pdfium.PdfDocument(str(pdf_dir / pdf))
            n = len(doc)
            doc.close()
        except Exception as e:  # noqa: BLE001 - a broken PDF is reported, not fatal for scoring
            out.append(f"{pdf}: cannot be opened ({e})")
            continue
        missing = [p for p in range(1, n + 1) if p not in tested.get(pdf, [])]
        if missing:
            out.append(f"{pdf}: pages without tests: {missing}")
    return out


_REPEAT = re.compile(r"_pg(\d+)_repeat(\d+)\.md$")


def candidate_files(candidate: Path, pdfs: list[str]) -> dict[tuple[str, int], list[Path]]:
    """(pdf, page) -> the candidate's repeat files for that page, sorted by repeat number."""
    by_rel: dict[str, Path] = {p.relative_to(candidate).as_posix(): p for p in candidate.rglob("*.md")}
    out: dict[tuple[str, int], list[tuple[int, Path]]] = {}
    for pdf in pdfs:
        base = pdf[:-4] if pdf.lower().endswith(".pdf") else pdf
        pattern = re.compile(rf"^{re.escape(base)}_pg(\d+)_repeat(\d+)\.md$")
        for rel, path in by_rel.items():
            m = pattern.match(rel)
            if m:
                out.setdefault((pdf, int(m.group(1))), []).append((int(m.group(2)), path))
    return {k: [p for _, p in sorted(v)] for k, v in out.items()}


def repeat_file_name(pdf: str, page: int, repeat: int) -> str:
    """``docs/a.pdf``, 2, 1 -> ``docs/a_pg2_repeat1.md``."""
    base = pdf[:-4] if pdf.lower().endswith(".pdf") else pdf
    return f"{base}_pg{page}_repeat{repeat}.md"
