"""A read-only output folder (#29.11): one line naming the folder and the reason, exit 2, no traceback
(needs OutputTarget.prepare's unwritable() check, in pipeline/target.py)."""

from __future__ import annotations

from tests.cli.support import cli
from tests.support.helpers import text_pdf

SHIM = """
import errno, os
_real_mkdir = os.mkdir
def _mkdir(path, *a, **kw):
    p = os.fsdecode(path)
    if os.path.basename(os.path.dirname(p)) == "ro-out":
        raise OSError(errno.EROFS, "Read-only file system", p)
    return _real_mkdir(path, *a, **kw)
os.mkdir = _mkdir
"""


def test_read_only_output_folder_is_one_line(tmp_path):
    text_pdf(tmp_path / "a.pdf", pages=1)
    out = tmp_path / "ro-out"
    out.mkdir()
    r = cli("convert", str(tmp_path / "a.pdf"), "-o", str(out), "--engine", "lite", "-q", shim=SHIM)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip() == f"error: output {out}: cannot write in the folder (Read-only file system)"
