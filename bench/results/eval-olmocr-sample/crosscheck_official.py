"""Cross-check: run the official olmOCR-Bench code (PyPI `olmocr`, Apache-2.0) on the same benchmark
folder and candidate, and compare its per-test verdicts with `ocrserve eval --json`.

Setup (a separate venv; olmocr's heavy dependencies are not needed for the bench tests):
    python3 -m venv /tmp/olmvenv
    /tmp/olmvenv/bin/pip install --no-deps olmocr==0.4.27
    /tmp/olmvenv/bin/pip install rapidfuzz fuzzysearch tqdm beautifulsoup4 playwright pypdf numpy
Run:
    /tmp/olmvenv/bin/python crosscheck_official.py BENCH_DIR CANDIDATE_DIR OCRSERVE_EVAL.json [--browser /usr/bin/chromium]
Playwright is pointed at the system Chromium (no browser download); math tests are included.
"""

import argparse
import glob
import json
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("candidate")
    ap.add_argument("ours")
    ap.add_argument("--browser", default="/usr/bin/chromium")
    args = ap.parse_args()

    import olmocr.bench.katex.render as render

    def _owner_init(self):
        from playwright.sync_api import sync_playwright

        self.p = sync_playwright().start()
        self.browser = self.p.chromium.launch(executable_path=args.browser, args=["--no-sandbox"])
        self._closed = False
        self._finalizer = lambda: None

    render._BrowserOwner.__init__ = _owner_init

    from olmocr.bench.benchmark import evaluate_candidate
    from olmocr.bench.tests import BaselineTest, load_tests

    pdf_dir = os.path.join(args.bench, "pdfs")
    pdfs = [os.path.relpath(p, pdf_dir) for p in glob.glob(os.path.join(pdf_dir, "**/*.pdf"), recursive=True)]
    tests = []
    for j in sorted(glob.glob(os.path.join(args.bench, "*.jsonl"))):
        tests += load_tests(j)
    for pdf in pdfs:
        if not any(t.type == "baseline" for t in tests if t.pdf == pdf):
            tests.append(BaselineTest(id=f"{pdf}_baseline", pdf=pdf, page=1, type="baseline"))
    out = evaluate_candidate(args.candidate, tests, pdfs, force=True)
    errors, results = out[2], out[6]
    official = {t.id: passed for page in results.values() for lst in page.values() for t, passed, _ in lst}
    ours = {t["id"]: t["passed"] for t in json.load(open(args.ours))["tests"]}
    same = [i for i in official if i in ours and ours[i] == official[i]]
    diff = [(i, official[i], ours.get(i)) for i in official if ours.get(i) != official[i]]
    print(
        f"official verdicts: {len(official)}, ocrserve verdicts: {len(ours)}, agree: {len(same)}, differ: {len(diff)}"
    )
    print(f"official passed: {sum(official.values())}, ocrserve passed: {sum(1 for v in ours.values() if v)}")
    for i, o, m in diff:
        print(f"  DIFF {i}: official={o} ocrserve={m}")
    for e in errors[:5]:
        print(f"  official error: {e}")
    return 0 if not diff else 1


if __name__ == "__main__":
    sys.exit(main())
