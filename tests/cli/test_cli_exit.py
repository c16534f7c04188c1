"""A run that has nothing to do exits without a traceback (#18.9).

Cause: ResilientPool.shutdown() used shutdown(wait=False); the executor's management thread then
closes its wakeup pipe while the interpreter exits, and concurrent.futures' exit hook wrote to it:
`OSError: [Errno 9] Bad file descriptor` on stderr in about half of the reruns here before the fix.
"""

from __future__ import annotations

import pytest

from tests.cli.support import cli, cli_async
from tests.support import helpers


@pytest.mark.slow
def test_skip_everything_reruns_exit_cleanly(tmp_path):
    d = helpers.text_pdfs(tmp_path / "in", "a.pdf", "b.pdf")
    out = tmp_path / "out"
    first = cli("convert", str(d), "-o", str(out), "--engine", "lite", "-q")
    assert first.returncode == 0, first.stderr
    bad = []
    for batch in range(5):  # 20 reruns, 4 at a time
        runs = [cli_async("convert", str(d), "-o", str(out), "--engine", "lite", "-q") for _ in range(4)]
        for n, p in enumerate(runs):
            _, err = p.communicate(timeout=240)
            assert p.returncode == 0, err
            if "Traceback" in err or "Error" in err:
                bad.append((batch * 4 + n, err[-2000:]))
    assert not bad, f"{len(bad)} of 20 reruns wrote a traceback; the first:\n{bad[0][1]}"
