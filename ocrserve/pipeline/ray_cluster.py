"""The Ray run's cluster side: joining a cluster (`connect`) and sizing the engine actors on it
(`actor_plan`), as the engine class's traits say (`engine_type`: the class whose traits a run follows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ocrserve.engines import Engine, engine_class
from ocrserve.errors import OcrserveError


class RayConvertError(OcrserveError, ValueError):
    """The Ray run cannot start (no Ray installed, cluster not reachable, bad option)."""


def connect(address: str | None, **init_kwargs: Any) -> bool:
    """Join a Ray cluster; True when this call started Ray (and so should shut it down).

    address: None or "auto" -> the running cluster (RAY_ADDRESS, or one started on this machine
    with `ray start`); "local" -> a fresh single-machine instance; anything else (ray://host:10001,
    host:6379) -> that cluster. A Ray instance this process already joined is used as is.
    """
    try:
        import ray
    except ImportError:
        raise RayConvertError(
            "--ray needs the [ray] extra (Ray is not installed): pip install '.[ray]' "
            "(in a clone of ocrserve; it is not on PyPI)"
        ) from None
    if ray.is_initialized():
        return False
    init_kwargs.setdefault("include_dashboard", False)
    init_kwargs.setdefault("log_to_driver", True)
    addr = None if address in (None, "", "auto") else address
    try:
        if addr is None:
            try:
                ray.init(address="auto", **init_kwargs)
            except ConnectionError:
                if address == "auto":
                    raise
                ray.init(**init_kwargs)
        else:
            ray.init(address=addr, **init_kwargs)
    except ConnectionError as e:
        raise RayConvertError(f"cannot reach the Ray cluster at {address!r}: {e}") from None
    return True


def engine_type(name: str, factory: Callable[..., Engine] | None) -> type[Engine]:
    """The class whose traits a run follows: the named engine's, a factory that is an Engine class, else
    the defaults of Engine (a factory function)."""
    if factory is None:
        return engine_class(name)
    return factory if isinstance(factory, type) and issubclass(factory, Engine) else Engine


def actor_plan(
    engine: type[Engine],
    engine_actors: int | None,
    gpus_per_actor: float | None,
    cpus_per_actor: float | None,
    resources: dict[str, float] | None = None,
) -> tuple[int, float, float]:
    """(actors, GPUs each, CPUs each), as the engine class says: one engine per GPU when the cluster has
    GPUs and the engine needs one; else an actor per two CPUs for a CPU-bound engine, one for the others.
    `resources`: the cluster's (ray.cluster_resources() when not given)."""
    if resources is None:
        import ray

        resources = ray.cluster_resources()
    gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
    if gpus_per_actor is None:
        gpus_per_actor = 1.0 if (gpus >= 1 and engine.needs_gpu) else 0.0
    if gpus_per_actor and gpus < gpus_per_actor:
        raise RayConvertError(
            f"the cluster has {gpus:g} GPUs, fewer than the {gpus_per_actor:g} each engine actor asks for"
        )
    if cpus_per_actor is None:
        cpus_per_actor = 1.0
    if engine_actors is None:
        if gpus_per_actor:
            engine_actors = max(1, int(gpus // gpus_per_actor))
        elif engine.cpu_bound:
            engine_actors = max(1, int(cpus // 2))  # leave half the CPUs to rendering and parsing
        else:
            engine_actors = 1  # an HTTP engine without GPUs: one actor keeps capacity() requests in flight
    if engine_actors < 1:
        raise RayConvertError(f"engine_actors must be at least 1, got {engine_actors}")
    return engine_actors, gpus_per_actor, cpus_per_actor
