"""Job retention: finished jobs are removed (row and files) once they are older than the TTL.

One sweep runs at startup, before the service takes requests or runs jobs (it also tidies what a stopped
service left behind, see `JobStore.tidy`), then one every `interval_s` seconds while the service runs.
Queued and running jobs are never touched. With a TTL of 0 jobs are kept until deleted.
"""

from __future__ import annotations

import asyncio
import logging

from ocrserve.api.jobs import JobStore
from ocrserve.api.metrics import Metrics

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(self, store: JobStore, interval_s: float, metrics: Metrics | None = None) -> None:
        self.store, self.metrics = store, metrics
        self.interval_s = max(0.05, float(interval_s))
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def startup(self) -> None:
        """Tidy and sweep once; run before the service takes requests."""
        n = await asyncio.to_thread(self.store.tidy)
        if n["removed"] or n["inputs"]:
            log.info(
                "removed %d job folder(s) without a job and %d input(s) of finished jobs", n["removed"], n["inputs"]
            )
        if n["adopted"]:
            log.warning("%d finished job(s) found without a row (a restored database?): adopted again", n["adopted"])
        if n["kept"]:
            log.warning(
                "%d job folder(s) hold a result but no job: kept as they are, under %s", n["kept"], self.store.jobs_dir
            )
        await self.sweep()

    def start(self) -> None:
        if self.store.ttl_s > 0:
            self._task = asyncio.create_task(self._loop(), name="ocrserve-job-sweeper")

    async def stop(self) -> None:
        """Stop the periodic sweep; a sweep in progress is finished first (it runs in a thread)."""
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def sweep(self) -> int:
        """Remove the expired jobs now; returns how many. A failure is logged, never raised."""
        try:
            n = await asyncio.to_thread(self.store.expire)
        except Exception:
            log.exception("sweeping expired jobs")
            return 0
        if self.metrics is not None:
            self.metrics.sweeps.inc()
            self.metrics.jobs_expired.inc(n)
        if n:
            log.info("removed %d expired job(s) (finished more than %gs ago)", n, self.store.ttl_s)
        return n

    async def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval_s)
                return
            except TimeoutError:
                pass
            await self.sweep()
