"""GPU benchmark of engine `hf` (issue 8): pages/s and GPU memory at batch sizes 1, 8 and 32.

On the GPU machine, after the stack is staged (`source /tmp/gpu/env.sh`: it sets CHANDRA1_SHAPE and
puts pydantic/selectolax, which ocrserve imports, on PYTHONPATH), from the repository root:

    python bench/hf_gpu.py --out $OUT                       # ~4-5 minutes on one H200
    python bench/hf_gpu.py --out $OUT --max-new-tokens 256  # quicker

The chandra1-shape folder has no weights: the engine draws them at random in bf16 from the config
(`random_weights=True`, like vLLM's --load-format dummy), so speed and memory are the real model's
and the text is not. Every page is a distinct synthetic 1632x2112 page (the same pages, seed for
seed, as bench/serve_gpu.py sends to vLLM), with the chandra-1 prompt, greedy, and a fixed output
length (`ignore_eos`: min_new_tokens = max_new_tokens, no retries). For each batch size the pages
go through `HFEngine.ocr()` concurrently, as the pipeline sends them, and the engine batches them.
A time budget guards the run: a configuration that would not fit in what is left runs fewer
batches, or is skipped (recorded as such).

Writes `<out>/hf_gpu.json`: machine, versions, command, load time, weights memory, and per batch
size: pages, seconds, pages/s, generated tokens/s, prompt tokens a page, peak GPU memory
(allocated and reserved by torch).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def say(msg: str) -> None:
    print(f"[hf_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def page_image(seed: int, width: int, height: int):
    """A distinct synthetic page: serve_gpu.synthetic_page when it is there (the vLLM benchmark's pages)."""
    from PIL import Image, ImageDraw

    try:
        from serve_gpu import synthetic_page

        url = synthetic_page(seed, width, height)
        return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
    except ImportError:
        import random

        rng = random.Random(seed)
        img = Image.new("L", (width, height), 255)
        d = ImageDraw.Draw(img)
        for y in range(120, height - 120, 48):
            x = 120
            while x < width - 200:
                bw = rng.randint(20, 90)
                d.rectangle([x, y, x + bw, y + 22], fill=rng.randint(0, 80))
                x += bw + rng.randint(8, 20)
        d.text((130, 60), f"page {seed} {rng.random():.12f}", fill=0)
        return img.convert("RGB")


def gib(n: int) -> float:
    return round(n / 2**30, 2)


def check_prepare(engine, folder: str, image) -> dict:
    """Compare the engine's own input preparation with AutoProcessor's (needs torchvision, present here)."""
    try:
        from transformers import AutoProcessor

        proc = AutoProcessor.from_pretrained(folder)
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": engine.profile.prompt}]}]
        text = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ref = proc(text=[text], images=[image], return_tensors="pt")
        ours = engine.prepare([image])
        same_ids = ref["input_ids"].tolist() == ours["input_ids"].tolist()
        same_grid = ref["image_grid_thw"].tolist() == ours["image_grid_thw"].tolist()
        max_px_diff = float((ref["pixel_values"].float() - ours["pixel_values"].float()).abs().max())
        return {"input_ids_equal": same_ids, "image_grid_equal": same_grid, "pixel_values_max_abs_diff": max_px_diff,
                "prompt_tokens": int(ours["input_ids"].shape[1])}
    except Exception as exc:  # noqa: BLE001 - a check, not the benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}


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
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.model:
        ap.error("--model or $CHANDRA1_SHAPE is needed")
    sizes = [int(x) for x in a.batch_sizes.split(",")]
    counts = [int(x) for x in a.pages.split(",")]
    if len(sizes) != len(counts):
        ap.error("--batch-sizes and --pages need the same number of entries")

    import torch
    import transformers

    from ocrserve.engines.hf import HFEngine
    from ocrserve.profiles import load_profile

    report: dict = {
        "benchmark": "engine hf, chandra1-shape with random bf16 weights, distinct synthetic pages, fixed output length",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "gpu_memory_gib": gib(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else None,
            "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        },
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "qwen3_vl": hasattr(transformers, "Qwen3VLForConditionalGeneration"),
                     "qwen3_5": hasattr(transformers, "Qwen3_5ForConditionalGeneration")},
        "settings": {"max_new_tokens": a.max_new_tokens, "page_size": [a.width, a.height], "dtype": "bfloat16",
                     "sampling": "greedy", "ignore_eos": True, "prompt": "chandra-1 layout prompt"},
        "results": {},
    }
    path = out / "hf_gpu.json"

    def save() -> None:
        path.write_text(json.dumps(report, indent=2))

    say(f"torch {torch.__version__}, transformers {transformers.__version__}, {report['machine']['gpu']}")
    profile = load_profile("chandra-1").model_copy(update={"max_retries": 0})
    t0 = time.perf_counter()
    engine = HFEngine(profile, checkpoint=a.model, device=a.device, dtype="bf16", batch_size=max(sizes),
                      max_tokens=a.max_new_tokens, ignore_eos=True, random_weights=True)
    report["load_s"] = round(time.perf_counter() - t0, 1)
    report["weights_gib"] = gib(torch.cuda.memory_allocated()) if torch.cuda.is_available() else None
    say(f"model ready in {report['load_s']} s, {report['weights_gib']} GiB on the GPU")
    report["prepare_check"] = check_prepare(engine, a.model, page_image(10_000, a.width, a.height))
    say(f"input preparation vs AutoProcessor: {report['prepare_check']}")
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
        seed = 0
        for bs, n in zip(sizes, counts):
            left = a.budget_s - (time.perf_counter() - start)
            batches = -(-n // bs)
            if step_s is not None:
                per_batch = a.max_new_tokens * step_s * (1.0 + bs / 64)  # larger batches: slower steps
                fit = int(left // per_batch)
                if fit < 1:
                    say(f"batch size {bs}: skipped, {left:.0f} s left and a batch takes ~{per_batch:.0f} s")
                    report["results"][str(bs)] = {"skipped": f"time budget ({left:.0f} s left, ~{per_batch:.0f} s a batch)"}
                    save()
                    continue
                if fit < batches:
                    say(f"batch size {bs}: {fit} batch(es) instead of {batches} to fit the time budget")
                    batches = fit
                    n = min(n, fit * bs)
            engine.batch_size = bs
            images = [page_image(seed + i, a.width, a.height) for i in range(n)]
            seed += n
            say(f"batch size {bs}: {n} pages x {a.max_new_tokens} tokens ...")
            try:
                r = await run_config(engine, images)
            except Exception as exc:  # noqa: BLE001 - record and go on
                r = {"error": f"{type(exc).__name__}: {exc}"}
            r["batch_size"] = bs
            report["results"][str(bs)] = r
            save()
            say(f"batch size {bs}: {json.dumps(r)}")
            if "seconds" in r and not r["errors"]:
                step_s = r["seconds"] / (-(-n // bs) * a.max_new_tokens)
            engine.batch_size = bs  # an out-of-memory run halves it; the next configuration sets its own
        await engine.aclose()

    asyncio.run(bench())
    report["total_s"] = round(time.perf_counter() - t0, 1)
    save()
    say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
