"""PDFs the process keeps open (render and lite caches) are closed before pypdfium2's exit hook (#18.10):
it printed "The following object was still open and will be closed now: <PdfDocument ...>" into CI logs."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.support import ROOT, _env
from tests.support import helpers

# pytest (like many programs) creates a weakref.finalize before pypdfium2 is imported: its exit hook then
# runs after pypdfium2's, which finds the cached documents still open
SCRIPT = """
import sys, weakref
class _X: pass
_keep = _X(); weakref.finalize(_keep, lambda: None)
from ocrserve.ingest.raster import Budget, open_source, render_page
from ocrserve.engines.lite.engine import _open_pdf
from ocrserve.profiles import load_profile
path = sys.argv[1]
info = open_source(path, None, 10**8)
render_page(path, info.type, 0, Budget.from_profile(load_profile("chandra-1")), None, 10**8)
assert len(_open_pdf(path, None)) == info.page_count
print("done")
"""


def test_cached_pdfs_closed_quietly_at_exit(tmp_path):
    pdf = helpers.text_pdf(tmp_path / "t.pdf", pages=2)
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(pdf)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    assert "still open" not in r.stderr and "Cannot close" not in r.stderr, r.stderr
