"""`ocrserve serve`: vLLM replicas of a Chandra model on the local GPUs, memory-lean and supervised."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Literal, cast

import typer

from ocrserve.cli.configopt import config_option

HELP = """Serve a Chandra model with vLLM on the local GPUs (one replica per GPU by default, behind one URL).

By default Chandra 2 (datalab-to/chandra-ocr-2) in bf16, the precision it is published and evaluated
in, with the server flags of its own launcher. Prints the memory plan, then starts (or attaches to) the vLLM servers, waits until they are
healthy, restarts one that dies and stops them all on Ctrl-C / SIGTERM. Flags after `--` go to
`vllm serve` unchanged and win over ours, e.g. `ocrserve serve -- --enforce-eager`.
"""

Memory = Literal["lean", "max"]
Quantization = Literal["fp8", "none"]


def _parse_gpus(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"--gpus must be comma-separated GPU indexes like 0,1, got {text!r}") from None


def register(app: typer.Typer) -> None:
    @app.command("serve", help=HELP, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def serve(
        ctx: typer.Context,
        model: str = typer.Option(
            "chandra-2", "--model", "-m", help="chandra-2, chandra-1, a profile file, or a model folder"
        ),
        profile: str | None = typer.Option(None, help="model profile when --model is a folder (default chandra-2)"),
        gpus: str | None = typer.Option(None, help="GPU indexes to use, e.g. 0,1 (default: all)"),
        parallel: str = typer.Option(
            "dp", help="dp (a replica per GPU), tp (tensor parallel), epd (encoder/decoder split)"
        ),
        dp_backend: str = typer.Option(
            "processes", help="dp as one process per GPU (processes) or vLLM's --data-parallel-size (vllm)"
        ),
        memory: str = typer.Option("lean", help="lean: KV cache sized for --concurrency; max: 90% of the GPU"),
        quantization: str = typer.Option(
            "none",
            help="none: bf16, the precision Chandra is published and evaluated "
            "in. fp8: weights and KV cache quantized, which changes the model's output "
            "(not what Chandra was published or evaluated in); it saves memory only: on "
            "an H200 it bought Chandra 2 no throughput (4.36 vs 4.34 pages/s)",
        ),
        concurrency: int | None = typer.Option(
            None,
            min=1,
            help="pages in flight a replica is sized for "
            "(--max-num-seqs); default 128, or with --memory lean as many as "
            "fit in 90% of the GPU when 128 do not",
        ),
        output_tokens: int = typer.Option(
            1024, help="expected output tokens a page (KV plan; max length stays the profile's)"
        ),
        max_num_batched_tokens: int | None = typer.Option(
            None, help="prefill tokens a step (default: two largest pages)"
        ),
        gpu_memory_utilization: float | None = typer.Option(
            None, help="with --memory max: fraction of the GPU (default 0.9)"
        ),
        port: int = typer.Option(
            8000,
            help="the port clients use; on several GPUs the router listens here and "
            "replica i on 127.0.0.1:port+1+i (with --no-router: replica i on port+i)",
        ),
        router: bool = typer.Option(
            True,
            "--router/--no-router",
            help="dp on several GPUs: one URL (a router "
            "sending each request to the least busy replica, a dead one routed around); "
            "--no-router: a URL per replica",
        ),
        host: str = typer.Option("127.0.0.1", help="interface the servers listen on"),
        served_model_name: str = typer.Option("chandra", help="model name the server answers to"),
        load_format: str | None = typer.Option(None, help="vLLM --load-format (dummy: random weights, for benchmarks)"),
        enforce_eager: bool = typer.Option(False, help="skip torch.compile and CUDA graphs (fast start, slower)"),
        renderer_workers: int = typer.Option(
            8,
            min=0,
            help="vLLM API server threads preprocessing requests "
            "(--renderer-num-workers, vLLM >= 0.26); 0 = vLLM's default (1)",
        ),
        mm_cache_gb: float = typer.Option(1.0, help="vLLM multimodal processor cache (CPU RAM, GiB; retries hit it)"),
        prefix_caching: bool = typer.Option(True, help="vLLM prefix caching (a retried page skips its prefill)"),
        epd_encoders: int = typer.Option(1, help="with --parallel epd: GPUs running the vision tower"),
        gpu_memory_gib: float | None = typer.Option(None, help="GPU memory to plan for instead of asking nvidia-smi"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and the commands, start nothing"),
        api_port: int | None = typer.Option(None, help="also run the OCR HTTP API on this port (when installed)"),
        vllm_bin: str | None = typer.Option(None, help="vllm executable (default: OCRSERVE_VLLM_BIN, else vllm)"),
        log_dir: Path | None = typer.Option(None, help="where each process logs (default: a temp folder)"),
        health_timeout: float = typer.Option(900.0, help="seconds a server may take to become healthy"),
        max_restarts: int = typer.Option(3, help="restarts in a row of a dying replica before giving up"),
        config: str | None = config_option("serve", env_backed=lambda: ["vllm_bin"]),
    ) -> None:
        from ocrserve.profiles import load_profile
        from ocrserve.settings import get_settings
        from ocrserve.vllm.gpus import NoGPUError, detect_gpus
        from ocrserve.vllm.launch import ServeOptions, build_layout, model_ref, renderer_workers_for
        from ocrserve.vllm.plan import ModelShape, plan_replica
        from ocrserve.vllm.supervise import ServeError, Supervisor

        for name, value, allowed in [
            ("--parallel", parallel, ("dp", "tp", "epd")),
            ("--memory", memory, ("lean", "max")),
            ("--quantization", quantization, ("fp8", "none")),
            ("--dp-backend", dp_backend, ("processes", "vllm")),
        ]:
            if value not in allowed:
                raise typer.BadParameter(f"{name} must be one of {', '.join(allowed)}, got {value!r}") from None
        model_dir = Path(model) if Path(model).is_dir() else None
        try:
            prof = load_profile(profile or ("chandra-2" if model_dir else model))
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--model") from None
        shape = ModelShape.from_profile(prof)
        if model_dir:
            shape = shape.with_model_config(model_dir)
        wanted = _parse_gpus(gpus)
        if gpu_memory_gib is not None:
            gpu_ids, mem = wanted or [0], gpu_memory_gib
        else:
            try:
                found = detect_gpus()
            except NoGPUError as e:
                typer.echo(
                    f"error: {e}" + ("; with --dry-run, give --gpu-memory-gib to plan anyway" if dry_run else ""),
                    err=True,
                )
                raise typer.Exit(2) from None
            by_index = {g.index: g for g in found}
            missing = [i for i in (wanted or []) if i not in by_index]
            if missing:
                raise typer.BadParameter(
                    f"no GPU {missing}; this machine has {sorted(by_index)}", param_hint="--gpus"
                ) from None
            gpu_ids = wanted or sorted(by_index)
            mem = min(by_index[i].memory_gib for i in gpu_ids)
        n = len(gpu_ids)
        share = 1.0 / n if parallel == "tp" else 1.0
        workers, warning = renderer_workers_for(renderer_workers, _installed_vllm_version())
        if warning:
            typer.echo(f"note: {warning}", err=True)
        plan_kw: dict[str, Any] = {
            "expected_output_tokens": output_tokens,
            "max_num_batched_tokens": max_num_batched_tokens,
            "weight_share": share,
            "prefix_caching": prefix_caching,
        }
        if concurrency is None:
            concurrency = _default_concurrency(prof, shape, mem, memory, quantization, plan_kw)
        try:
            # checked against their choices above (_choice)
            plan = plan_replica(
                prof,
                shape,
                mem,
                memory=cast(Memory, memory),
                quantization=cast(Quantization, quantization),
                concurrency=concurrency,
                gpu_memory_utilization=gpu_memory_utilization,
                **plan_kw,
            )
            # the options ServeOptions takes as they are (served_model_name, parallel, host, port, ...), then the rest
            same = {k: v for k, v in ctx.params.items() if k in ServeOptions.model_fields}
            decided = {
                "model": model_ref(model, prof),
                "gpus": gpu_ids,
                "vllm_bin": vllm_bin or get_settings().vllm_bin,
                "mm_processor_cache_gb": mm_cache_gb,
                "extra_args": list(ctx.args),
                "renderer_workers": workers,
            }
            opts = ServeOptions(**(same | decided))
            layout = build_layout(opts, prof, plan)
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None

        typer.echo(
            f"{prof.name} ({opts.model}) on GPU {','.join(map(str, gpu_ids))}, parallel {parallel}"
            + (" (per GPU)" if parallel == "tp" else "")
        )
        typer.echo(plan.describe())
        typer.echo("commands:")
        for p in layout.processes:
            typer.echo(f"  [{p.name}] {p.shell()}")
        replicas = [p.url for p in layout.processes if p.role == "replica"]
        fronted = any(p.role == "router" for p in layout.processes)
        if fronted:
            typer.echo(
                f"router: one URL over {len(replicas)} replicas ({' '.join(replicas)}), each request to the "
                "one with the fewest outstanding; a dead one is routed around"
            )
        typer.echo("endpoints: " + " ".join(layout.endpoints))  # (the serving sweep reads this line)
        if dry_run:
            return
        if api_port is not None:
            from ocrserve.cli.extras import require

            require("api", "ocrserve serve --api-port")  # before any vLLM server starts
        if fronted and importlib.util.find_spec("uvicorn") is None:  # the router's server (vLLM brings it along)
            from ocrserve.cli.extras import message

            typer.echo(
                message("ocrserve serve on several GPUs (its router; or --no-router)", "api", "uvicorn"), err=True
            )
            raise typer.Exit(2) from None

        if parallel == "epd":
            Path(opts.ec_storage).mkdir(parents=True, exist_ok=True)  # ECExampleConnector's shared folder
        logs = log_dir or Path(tempfile.mkdtemp(prefix="ocrserve-serve-"))
        sup = Supervisor(
            layout, logs, health_timeout=health_timeout, max_restarts=max_restarts, before_spawn=_vllm_found
        )
        sup.install_signal_handlers()
        typer.echo(f"logs: {logs}")
        try:
            sup.start()
        except ServeError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("stopped", err=True)
            raise typer.Exit(130) from None
        attached = [c.spec.name for c in sup.children if c.attached]
        typer.echo(
            "ready"
            + (f" (attached to running {', '.join(attached)})" if attached else "")
            + ": "
            + " ".join(layout.endpoints),
            err=False,
        )
        if api_port is not None:
            _start_api(api_port, host, layout.endpoints, served_model_name, prof.name, sup)
        try:
            sup.run()
        except ServeError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        typer.echo("stopped", err=True)


def _default_concurrency(prof, shape, mem: float, memory: str, quantization: str, plan_kw: dict) -> int:
    """128 pages in flight; with --memory lean as many as fit in 90% of the GPU when 128 do not (a note says
    so, and what fp8 would fit). Not even one page: an error naming what to change, exit 2."""
    from ocrserve.vllm.plan import DEFAULT_CONCURRENCY, MAX_UTILIZATION, fitting_concurrency

    if memory != "lean":
        return DEFAULT_CONCURRENCY
    n = fitting_concurrency(prof, shape, mem, quantization=quantization, **plan_kw)
    if n == DEFAULT_CONCURRENCY:
        return n
    where = f"{MAX_UTILIZATION:.0%} of a {mem:.1f} GiB GPU in {'fp8' if quantization == 'fp8' else 'bf16'}"
    n8 = fitting_concurrency(prof, shape, mem, quantization="fp8", **plan_kw) if quantization != "fp8" else 0
    fp8 = f"--quantization fp8 fits {n8} (weights and KV cache quantized: it changes the output)" if n8 else ""
    if n == 0:
        typer.echo(
            f"error: not one page in flight fits in {where}: "
            + (fp8 + "; or " if fp8 else "")
            + "use more GPUs (--parallel tp), or give --concurrency 1 to plan the whole card",
            err=True,
        )
        raise typer.Exit(2) from None
    typer.echo(
        f"note: {DEFAULT_CONCURRENCY} pages in flight do not fit in {where}: the lean plan is sized for {n} "
        "(--concurrency chooses)" + (f"; {fp8}" if fp8 else ""),
        err=True,
    )
    return n


def _vllm_found(spec) -> None:
    """Before a vLLM server is started (never when one already answers on its port): the default
    `vllm` executable that is not on PATH is the [vllm] extra not installed: one line, exit 2.
    A --vllm-bin / OCRSERVE_VLLM_BIN path is run as given."""
    from ocrserve.cli.extras import message

    exe = spec.argv[0] if spec.argv else ""
    if spec.role not in ("proxy", "router") and exe == "vllm" and shutil.which(exe) is None:
        typer.echo(message("ocrserve serve", "vllm", "vllm"), err=True)
        raise typer.Exit(2) from None


def _start_api(port: int, host: str, endpoints: list[str], served_model: str, profile: str, sup) -> None:
    """Hook for the OCR HTTP API (ocrserve.api.app, built separately): uvicorn in a thread, fed the replica URLs.

    The API (ocrserve.api.create_app) gets one openai engine spread over the replica URLs.
    """
    if importlib.util.find_spec("ocrserve.api") is None or importlib.util.find_spec("ocrserve.api.app") is None:
        typer.echo("note: the OCR API (ocrserve.api.app) is not installed; serving vLLM only", err=True)
        return
    import uvicorn

    from ocrserve.api import create_app
    from ocrserve.api.server import uvicorn_options
    from ocrserve.settings import get_settings

    # one openai engine over every replica (comma-separated URLs: pages go to the least busy one)
    settings = get_settings(server=",".join(endpoints), served_model=served_model, model=profile, engine="openai")
    asgi = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(asgi, host=host, port=port, log_level="info", **uvicorn_options(settings)))
    # the supervisor owns SIGINT/SIGTERM: uvicorn (>= 0.29) installs its handlers only on the main thread
    threading.Thread(target=server.run, name="ocr-api", daemon=True).start()
    typer.echo(f"OCR API: http://{host}:{port}  (replicas: {shlex.join(endpoints)})")


def _installed_vllm_version() -> str | None:
    """The vLLM installed beside ocrserve, if any (an external --vllm-bin is not asked)."""
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None
