"""GPU benchmark of engine `hf` (issue 8): pages/s and GPU memory at batch sizes 1, 8 and 32.

On the GPU machine, after the stack is staged (`source /tmp/gpu/env.sh`: it sets CHANDRA1_SHAPE and
puts pydantic/selectolax, which ocrserve imports, on PYTHONPATH), from the repository root:

    python -m bench.hf_gpu --out $OUT                       # ~4-5 minutes on one H200
    python -m bench.hf_gpu --out $OUT --max-new-tokens 256  # quicker

The chandra1-shape folder has no weights: the engine draws them at random in bf16 from the config
(`random_weights=True`, like vLLM's --load-format dummy), so speed and memory are the real model's
and the text is not. Every page is a distinct synthetic 1632x2112 page (the pages the vLLM
benchmarks of issue 6 sent: page_image in bench/_hf_gpu.py), with the chandra-1 prompt, greedy, and a
fixed output length (`ignore_eos`: min_new_tokens = max_new_tokens, no retries). For each batch size the pages
go through `HFEngine.ocr()` concurrently, as the pipeline sends them, and the engine batches them.
A time budget guards the run: a configuration that would not fit in what is left runs fewer
batches, or is skipped (recorded as such).

Writes `<out>/hf_gpu.json`: machine, versions, command, load time, weights memory, and per batch
size: pages, seconds, pages/s, generated tokens/s, prompt tokens a page, peak GPU memory
(allocated and reserved by torch).

The pages of batch size B are seeds 1000*B, 1000*B+1, ...: any run (or part of a run) sends the same
pages for the same batch size, so the vLLM side gets exactly hf's pages:

    python -m bench.hf_gpu --out $OUT/vllm --vllm-url http://127.0.0.1:8000   # a vLLM server, same pages,
                                                                               # B requests in flight
Other modes: `--profile` (phases of one page: input preparation, prefill, decoding step; and a
torch.profiler table of a short generation), `--cache-experiment B,N` (generate() at batch B, N
tokens, dynamic vs static KV cache: the static one is compiled by transformers on CUDA).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

from bench._hf_gpu import cache_experiment, check_prepare, gib, page_image, profile_phases, run_vllm, say, seed_of


async def run_config(engine, images) -> dict:
    torch = engine._torch
    cuda = engine.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    results = await asyncio.gather(*(engine.ocr(_page(i, img)) for i, img in enumerate(images)))
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    errors = [r.error for r in results if r.finish_reason == "error"]
    gen_tokens = sum(r.completion_tokens or 0 for r in results)
    batches = sorted({b for r in results for b in r.extra.get("batch_sizes", [])})
    return {
        "pages": len(images),
        "seconds": round(elapsed, 2),
        "pages_per_s": round(len(images) / elapsed, 4),
        "generated_tokens": gen_tokens,
        "generated_tokens_per_s": round(gen_tokens / elapsed, 1),
        "prompt_tokens_per_page": sorted({r.prompt_tokens for r in results if r.prompt_tokens}),
        "batch_sizes_formed": batches,
        "peak_allocated_gib": gib(torch.cuda.max_memory_allocated()) if cuda else None,
        "peak_reserved_gib": gib(torch.cuda.max_memory_reserved()) if cuda else None,
        "errors": errors[:3],
    }


def _page(i: int, img):
    from ocrserve.engines import PageInput

    return PageInput(doc_id="bench", index=i, image=img, unit="px", source_type="png")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for hf_gpu.json")
    ap.add_argument("--model", default=os.environ.get("CHANDRA1_SHAPE"), help="model folder (default $CHANDRA1_SHAPE)")
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--pages", default="2,16,32", help="pages for each batch size (same order)")
    ap.add_argument("--max-new-tokens", type=int, default=1024, help="fixed output length a page")
    ap.add_argument("--width", type=int, default=1632)
    ap.add_argument("--height", type=int, default=2112)
    ap.add_argument("--budget-s", type=float, default=270.0, help="seconds for the measurements after loading")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--vllm-url", help="measure a vLLM server instead (same pages, batch size = requests in flight)")
    ap.add_argument("--profile", action="store_true", help="phases of a page and a torch.profiler table first")
    ap.add_argument("--cache-experiment", metavar="B,N", help="dynamic vs static KV cache at batch B, N tokens")
    ap.add_argument("--static-cache", action="store_true", help="the measured runs use the static (compiled) cache")
    ap.add_argument("--repeat", type=int, default=1, help="run each batch size this many times; the last is the figure")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.model and not a.vllm_url:
        ap.error("--model or $CHANDRA1_SHAPE is needed")
    sizes = [int(x) for x in a.batch_sizes.split(",") if x]
    counts = [int(x) for x in a.pages.split(",") if x]
    if len(sizes) != len(counts):
        ap.error("--batch-sizes and --pages need the same number of entries")
    if a.vllm_url:
        report = {
            "benchmark": "vLLM server, the pages of bench/hf_gpu.py, fixed output length, B requests in flight",
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "settings": {
                "max_new_tokens": a.max_new_tokens,
                "page_size": [a.width, a.height],
                "sampling": "greedy",
                "ignore_eos": True,
                "prompt": "chandra-1 layout prompt",
            },
            "results": {},
        }
        path = out / "vllm_same_pages.json"
        run_vllm(a, sizes, counts, report, lambda: path.write_text(json.dumps(report, indent=2)))
        say(f"wrote {path}")
        return 0

    import torch
    import transformers

    from ocrserve.engines.hf import HFEngine
    from ocrserve.profiles import load_profile

    report: dict = {
        "benchmark": "engine hf, chandra1-shape with random bf16 weights, distinct synthetic pages, fixed output length",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "gpu_memory_gib": gib(torch.cuda.get_device_properties(0).total_memory)
            if torch.cuda.is_available()
            else None,
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "qwen3_vl": hasattr(transformers, "Qwen3VLForConditionalGeneration"),
            "qwen3_5": hasattr(transformers, "Qwen3_5ForConditionalGeneration"),
        },
        "settings": {
            "max_new_tokens": a.max_new_tokens,
            "page_size": [a.width, a.height],
            "dtype": "bfloat16",
            "sampling": "greedy",
            "ignore_eos": True,
            "prompt": "chandra-1 layout prompt",
        },
        "results": {},
    }
    path = out / "hf_gpu.json"

    def save() -> None:
        path.write_text(json.dumps(report, indent=2))

    say(f"torch {torch.__version__}, transformers {transformers.__version__}, {report['machine']['gpu']}")
    profile = load_profile("chandra-1").model_copy(update={"max_retries": 0})
    t0 = time.perf_counter()
    engine = HFEngine(
        profile,
        checkpoint=a.model,
        device=a.device,
        dtype="bf16",
        batch_size=max(sizes),
        max_tokens=a.max_new_tokens,
        ignore_eos=True,
        random_weights=True,
        static_cache=a.static_cache,
    )
    report["settings"]["static_cache"] = a.static_cache
    report["load_s"] = round(time.perf_counter() - t0, 1)
    report["weights_gib"] = gib(torch.cuda.memory_allocated()) if torch.cuda.is_available() else None
    say(f"model ready in {report['load_s']} s, {report['weights_gib']} GiB on the GPU")
    report["prepare_check"] = check_prepare(engine, a.model, page_image(10_000, a.width, a.height))
    say(f"input preparation vs AutoProcessor: {report['prepare_check']}")
    save()
    if a.profile:
        report["phases"] = profile_phases(engine, a, out)
        save()
    if a.cache_experiment:
        b, n = (int(x) for x in a.cache_experiment.split(","))
        report["cache_experiment"] = cache_experiment(engine, a, b, n)
        save()

    async def bench() -> None:
        # warm-up: kernels, allocator; not measured
        engine.batch_size, engine.max_tokens = 2, 8
        t = time.perf_counter()
        await run_config(engine, [page_image(20_000 + i, a.width, a.height) for i in range(2)])
        say(f"warm-up done in {time.perf_counter() - t:.1f} s")
        engine.max_tokens = a.max_new_tokens
        start = time.perf_counter()
        step_s = None  # seconds a decoding step, from the last configuration (an upper bound for smaller ones)
        for bs, n in zip(sizes, counts):
            left = a.budget_s - (time.perf_counter() - start)
            batches = -(-n // bs)
            if step_s is not None:
                per_batch = a.repeat * a.max_new_tokens * step_s * (1.0 + bs / 64)  # larger batches: slower steps
                fit = int(left // per_batch)
                if fit < 1:
                    say(f"batch size {bs}: skipped, {left:.0f} s left and a batch takes ~{per_batch:.0f} s")
                    report["results"][str(bs)] = {
                        "skipped": f"time budget ({left:.0f} s left, ~{per_batch:.0f} s a batch)"
                    }
                    save()
                    continue
                if fit < batches:
                    say(f"batch size {bs}: {fit} batch(es) instead of {batches} to fit the time budget")
                    batches = fit
                    n = min(n, fit * bs)
            engine.batch_size = bs
            images = [page_image(seed_of(bs, i), a.width, a.height) for i in range(n)]
            say(f"batch size {bs}: {n} pages x {a.max_new_tokens} tokens ...")
            first = None
            for rep in range(a.repeat):  # with --static-cache the first run of a batch size compiles
                try:
                    r = await run_config(engine, images)
                except Exception as exc:  # noqa: BLE001 - record and go on
                    r = {"error": f"{type(exc).__name__}: {exc}"}
                if rep == 0 and a.repeat > 1:
                    first = r
                    say(f"batch size {bs}, first run (not the figure): {json.dumps(r)}")
            if first is not None:
                r["first_run"] = first
            r["batch_size"] = bs
            report["results"][str(bs)] = r
            save()
            say(f"batch size {bs}: {json.dumps(r)}")
            if "seconds" in r and not r["errors"]:
                step_s = r["seconds"] / (batches * a.max_new_tokens)
        await engine.aclose()

    asyncio.run(bench())
    report["total_s"] = round(time.perf_counter() - t0, 1)
    save()
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
