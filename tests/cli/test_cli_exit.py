"""A run that has nothing to do exits without a traceback (#18.9).

Cause: ResilientPool.shutdown() used shutdown(wait=False); the executor's management thread then
closes its wakeup pipe while the interpreter exits, and concurrent.futures' exit hook wrote to it:
`OSError: [Errno 9] Bad file descriptor` on stderr in about half of the reruns here before the fix.
"""

from __future__ import annotations

import pytest

from tests.cli.support import cli, cli_async
from tests.support import helpers

# concurrent.futures' exit hook checks that a pool's wakeup pipe is open, then writes to it; the race is
# the pool's management thread closing the pipe in between. This shim makes the exit hook wait there (up
# to 5 s) until the thread has closed it, so a rerun hits the race every time instead of in about every
# second rerun (20 reruns once); a pool joined before the hook runs has its pipe closed before the check.
WIDEN_EXIT_RACE = """
import concurrent.futures.process as _cfp, time as _time
def _wakeup(self):
    if not self._closed:
        for _ in range(50 if _cfp._global_shutdown else 0):
            if self._closed:
                break
            _time.sleep(0.1)
        self._writer.send_bytes(b"")
_cfp._ThreadWakeup.wakeup = _wakeup
"""


@pytest.mark.slow
def test_skip_everything_reruns_exit_cleanly(tmp_path):
    d = helpers.text_pdfs(tmp_path / "in", "a.pdf", "b.pdf")
    out = tmp_path / "out"
    first = cli("convert", str(d), "-o", str(out), "--engine", "lite", "-q")
    assert first.returncode == 0, first.stderr
    bad = []
    # 4 reruns at a time, 2 of them with the race widened
    runs = [
        cli_async("convert", str(d), "-o", str(out), "--engine", "lite", "-q", shim=WIDEN_EXIT_RACE if n % 2 else "")
        for n in range(4)
    ]
    for n, p in enumerate(runs):
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        if "Traceback" in err or "Error" in err:
            bad.append((n, err[-2000:]))
    assert not bad, f"{len(bad)} of 4 reruns wrote a traceback; the first:\n{bad[0][1]}"
