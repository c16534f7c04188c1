"""A read-only output folder (#29.11): one line naming the folder and the reason, exit 2, no traceback
(needs OutputTarget.prepare's unwritable() check, in pipeline/target.py)."""

from __future__ import annotations

from tests.cli.support import cli, mkdir_fails
from tests.support.helpers import text_pdf

# nothing can be made in a folder named ro-out
SHIM = mkdir_fails("EROFS", 'os.path.basename(os.path.dirname(p)) == "ro-out"')


def test_read_only_output_folder_is_one_line(tmp_path):
    text_pdf(tmp_path / "a.pdf", pages=1)
    out = tmp_path / "ro-out"
    out.mkdir()
    r = cli("convert", str(tmp_path / "a.pdf"), "-o", str(out), "--engine", "lite", "-q", shim=SHIM)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip() == f"error: output {out}: cannot write in the folder (Read-only file system)"
