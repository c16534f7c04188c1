"""An output folder inside the input folder is never read back as input (issue 29, item 1)."""

from __future__ import annotations

import subprocess
import sys

from ocrserve.ingest.sources import expand_sources
from tests.support import helpers


def test_the_output_folder_is_not_walked(tmp_path):
    docs = helpers.text_pdfs(tmp_path / "docs", "a.pdf")
    out = docs / "out"
    (out / "a").mkdir(parents=True)
    helpers.text_pdf(out / "a" / "a.pdf", pages=1)  # the searchable PDF a first run wrote
    (out / "a" / "a.html").write_text("<html><body>old output</body></html>")
    names = [s.name for s in expand_sources([docs], exclude=out)]
    assert names == ["a"]
    assert len(expand_sources([docs])) == 3  # without the exclusion the old outputs are inputs too


def test_reruns_into_a_folder_inside_the_input_convert_the_same_documents(tmp_path):
    docs = helpers.text_pdfs(tmp_path / "docs", "a.pdf", "b.pdf")
    out = docs / "out"
    cmd = [sys.executable, "-m", "ocrserve", "convert", str(docs), "-o", str(out), "--format", "md,json,pdf,html"]
    for _ in range(3):
        r = subprocess.run(cmd + ["--json-log"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a", "b"]  # no out/out/..., no outputs of outputs
    assert '"documents": 2' in r.stdout
