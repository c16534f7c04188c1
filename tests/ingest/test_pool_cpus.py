"""The worker pools are sized by the CPUs the process may run on (its affinity: a container's cpuset,
`taskset`), not by the machine's CPU count: 8 render workers on 2 allowed cores only contend."""

from __future__ import annotations

import os

import pytest

from ocrserve.engines.lite.options import default_workers as lite_workers
from ocrserve.ingest import pool
from ocrserve.ingest.pool import default_workers, usable_cpus


def test_usable_cpus_is_the_affinity_and_sizes_the_pools(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3}, raising=False)
    assert usable_cpus() == 2
    assert default_workers() == 2 and default_workers(5) == 5  # asked for: as asked
    assert lite_workers(None) == 2 and lite_workers(3) == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(40)), raising=False)
    assert default_workers() == 8 and default_workers(cap=16) == 16  # the cap holds


def test_without_an_affinity_api_the_cpu_count(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert usable_cpus() == 3 and default_workers() == 3


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's affinity API")
def test_a_process_pinned_to_one_cpu_gets_one_worker():
    import subprocess
    import sys

    cpu = sorted(os.sched_getaffinity(0))[0]
    code = (
        f"import os; os.sched_setaffinity(0, {{{cpu}}}); "
        "from ocrserve.ingest.pool import default_workers; print(default_workers())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1", out
    assert pool.usable_cpus() >= 1
