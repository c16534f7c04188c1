"""`ocrserve.convert` (the synchronous API) never formats its documents: asyncio.run's runner, closing,
puts back the SIGINT handler it installed, and `signal` turns the old one (a partial holding the run's main
task) into an enum by trying `Handlers(old)`, whose ValueError message is `%r` of it: the task's repr, its
result included. Were that result the run's documents, every block of every page would be formatted once
more at the end of each run. Run as a script is run
(the main thread of its own process, Python's own SIGINT handler), which a test worker is not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import helpers

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
import ocrserve
from ocrserve.document import Document, Page

formatted = []
def spy(self):
    formatted.append(type(self).__name__)
    return "x"
Document.__repr__ = Page.__repr__ = spy
(res,) = ocrserve.convert(sys.argv[1], output_dir=sys.argv[2], server=sys.argv[3], engine="openai")
assert len(res.document.pages) == 2 and res.document.pages[0].blocks
print("formatted", len(formatted))
"""


def test_the_run_formats_no_document_and_no_page(tmp_path, standin):
    pdf = helpers.text_pdf(tmp_path / "one.pdf", pages=2)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(pdf), str(tmp_path / "out"), standin.url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["formatted", "0"], out.stdout
