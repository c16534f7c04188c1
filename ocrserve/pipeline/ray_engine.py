"""The Ray run's engine stage: the actor that holds one engine and answers the rendered pages of a
batch (`EngineStage`), built on each actor from an `EngineSpec` shipped by the driver.

A model engine is wrapped in FallbackEngine (the lite fallback made when first needed), as in the
local run; the rows in and out are ray_stages.py's.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ocrserve.engines import Engine, EngineResult, PageInput, create_engine
from ocrserve.engines.base import engine_error
from ocrserve.ingest.isolate import quiet_dead_resource_tracker
from ocrserve.pipeline import page as steps
from ocrserve.pipeline.ray_stages import page_input
from ocrserve.pipeline.rescue import Rescue
from ocrserve.profiles import Profile, load_profile
from ocrserve.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class EngineSpec:
    """How an engine actor builds its engine. `factory(profile, settings, **options)` overrides `name`."""

    name: str | None
    model: Profile  # the Profile itself travels (a profile file need not exist on the workers)
    settings: Settings
    options: dict[str, Any] = field(default_factory=dict)
    fallback: bool = True
    password: str | None = None
    factory: Callable[..., Engine] | None = None

    def build(self, profile: Profile) -> Engine:
        options = dict(self.options)
        server = options.get("server")
        if isinstance(server, str) and "{node_ip}" in server:
            import ray

            options["server"] = server.replace("{node_ip}", ray.util.get_node_ip_address())
        if self.factory is not None:
            return self.factory(profile, self.settings, **options)
        return create_engine(self.name, profile, self.settings, **options)


class EngineStage:
    """A Ray Data actor holding one engine (a model engine wrapped in FallbackEngine: the lite fallback
    is made when first needed).

    Async: Ray Data runs several batches of an actor concurrently on its event loop, so an HTTP
    engine keeps its `capacity()` requests in flight; batched engines (in-process vLLM: `batched`)
    get a whole batch at once.
    """

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec
        self.profile = load_profile(spec.model)
        engine = spec.build(self.profile)
        # the engine holds the Rescue, not the stage: Ray Data drops the stage, and __del__ closes the
        # engines, only when nothing else holds it
        self._rescue = Rescue(self.profile, spec.settings)
        if spec.fallback:
            engine = self._rescue.wrap(engine)
        self.engine: Engine | None = engine  # None once closed
        self._sem = asyncio.Semaphore(max(1, int(engine.capacity())))
        # the event loop Ray Data runs __call__ on (engines' clients live there)
        self._loop: asyncio.AbstractEventLoop | None = None

    def __del__(self) -> None:
        # Ray Data drops the UDF when the actor exits gracefully (MapWorker.__ray_shutdown__), before
        # Ray kills the actor's child processes: close the engines now, so their worker pools and
        # clients shut down cleanly (no leaked semaphores or resource_tracker warnings).
        self.close()

    def close(self, timeout: float = 60.0) -> None:
        """Close the engine and the fallback engine (aclose); idempotent, never raises."""
        rescue: Rescue | None = getattr(self, "_rescue", None)  # None: __init__ failed before it
        made = rescue.owned() if rescue is not None else None
        engines = [e for e in (getattr(self, "engine", None), made) if e is not None]
        if engines:
            quiet_dead_resource_tracker()
        self.engine = None
        if rescue is not None:
            rescue.engine = None
        loop = getattr(self, "_loop", None)
        for eng in engines:
            try:
                if loop is not None and loop.is_running() and not _on_loop(loop):
                    asyncio.run_coroutine_threadsafe(eng.aclose(), loop).result(timeout)
                else:  # no loop to use (never called, or called from it): a fresh one in a thread
                    t = threading.Thread(target=lambda e=eng: asyncio.run(e.aclose()), daemon=True)
                    t.start()
                    t.join(timeout)
            except Exception:
                log.warning("closing engine %s failed", getattr(eng, "name", eng), exc_info=True)

    async def _ocr_one(self, engine: Engine, pi: PageInput) -> EngineResult:
        async with self._sem:
            try:
                return await engine.ocr(pi)
            except Exception as e:
                log.exception("engine %s raised on %s page %d", engine.name, pi.doc_id, pi.index + 1)
                return engine_error(engine.name, e)

    async def _results(self, engine: Engine, inputs: list[PageInput]) -> list[tuple[EngineResult, float]]:
        if engine.batched:
            t0 = time.perf_counter()
            try:
                results = await engine.ocr_batch(inputs)
            except Exception as e:
                log.exception("engine %s raised on a batch", engine.name)
                results = [engine_error(engine.name, e) for _ in inputs]
            dt = (time.perf_counter() - t0) / max(1, len(inputs))
            return [(r, dt) for r in results]

        async def one(pi: PageInput) -> tuple[EngineResult, float]:
            t0 = time.perf_counter()
            r = await self._ocr_one(engine, pi)
            return r, time.perf_counter() - t0

        return list(await asyncio.gather(*(one(pi) for pi in inputs)))

    async def __call__(self, batch: Any) -> Any:  # pyarrow.Table -> pyarrow.Table
        import pyarrow as pa

        engine = self.engine
        if engine is None:
            raise RuntimeError("the engine stage is closed")
        self._loop = asyncio.get_running_loop()
        rows = batch.to_pylist()
        todo = [i for i, r in enumerate(rows) if r["kind"] == "page" and not r["page_json"]]
        inputs = [page_input(rows[i], self.spec.password) for i in todo]
        for i, (res, dt) in zip(todo, await self._results(engine, inputs)):
            status, err = steps.page_status(res)
            rows[i].update(
                has_result=True,
                raw=res.raw or "",
                fill_raw=res.extra.get("fill_raw") or "",
                status=str(status),
                engine=res.engine or engine.name,
                attempts=res.attempts,
                finish_reason=res.finish_reason or "",
                model_error=err or "",
                prompt_tokens=-1 if res.prompt_tokens is None else res.prompt_tokens,
                completion_tokens=-1 if res.completion_tokens is None else res.completion_tokens,
                engine_s=dt,
            )
        return pa.Table.from_pylist(rows, schema=batch.schema)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
