"""The parts of bench/hf_gpu.py besides its main run (not a script): the pages, the vLLM counterpart on
the same pages (`--vllm-url`), the input-preparation check, and the `--profile` and `--cache-experiment`
diagnostics."""

from __future__ import annotations

import asyncio
import io
import json
import random
import time
from pathlib import Path


def say(msg: str) -> None:
    print(f"[hf_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def page_image(seed: int, width: int, height: int):
    """A distinct document-like page (lines of random glyph blocks, a seeded caption), RGB: the pages the
    vLLM benchmarks of issue 6 sent (formerly bench/serve_gpu.py `synthetic_page`), pixel for pixel."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    img = Image.new("L", (width, height), 255)
    d = ImageDraw.Draw(img)
    y = 120
    while y < height - 120:
        x = 120
        while x < width - 200:
            bw = rng.randint(20, 90)
            d.rectangle([x, y, x + bw, y + 22], fill=rng.randint(0, 80))
            x += bw + rng.randint(8, 20)
        y += rng.randint(34, 60)
    d.text((130, 60), f"page {seed} {rng.random():.12f}", fill=0)
    return img.convert("RGB")


def _greedy():
    from ocrserve.profiles import Sampling

    return Sampling(temperature=0.0, top_p=1.0)


def seed_of(batch_size: int, i: int) -> int:
    """The i-th page of batch size `batch_size` (the same in the hf and the vLLM runs; distinct across
    batch sizes while a batch size has fewer than 1,000 pages)."""
    return 1000 * batch_size + i


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
        return {
            "input_ids_equal": same_ids,
            "image_grid_equal": same_grid,
            "pixel_values_max_abs_diff": max_px_diff,
            "prompt_tokens": int(ours["input_ids"].shape[1]),
        }
    except Exception as exc:  # noqa: BLE001 - a check, not the benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}


async def vllm_config(url: str, model: str, images, max_tokens: int, concurrency: int) -> dict:
    """The same pages through a vLLM server, `concurrency` requests in flight (PNG data URLs, the
    chandra-1 prompt, greedy, ignore_eos): the like-for-like counterpart of one hf batch size."""
    import httpx

    from ocrserve.engines import chat
    from ocrserve.profiles import load_profile

    profile = load_profile("chandra-1")
    urls = []
    for img in images:
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        urls.append(chat.data_url(buf.getvalue(), "image/png"))
    sem = asyncio.Semaphore(concurrency)
    usage: list[dict] = []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=1800, limits=limits) as c:

        async def one(u: str) -> None:
            body = chat.body(model, u, profile.prompt, profile.sampling, max_tokens, ignore_eos=True)
            async with sem:
                r = await c.post(f"{url}/v1/chat/completions", json=body)
            if r.status_code != 200:
                errors.append(f"{r.status_code}: {r.text[:200]}")
            else:
                usage.append(r.json().get("usage") or {})

        t0 = time.perf_counter()
        await asyncio.gather(*(one(u) for u in urls))
        elapsed = time.perf_counter() - t0
    gen = sum(u.get("completion_tokens", 0) for u in usage)
    return {
        "pages": len(images),
        "concurrency": concurrency,
        "seconds": round(elapsed, 2),
        "pages_per_s": round(len(images) / elapsed, 4),
        "generated_tokens": gen,
        "generated_tokens_per_s": round(gen / elapsed, 1),
        "prompt_tokens_per_page": sorted({u.get("prompt_tokens") for u in usage}),
        "errors": errors[:3],
    }


def run_vllm(a, sizes, counts, report, save) -> None:
    import httpx

    models = httpx.get(f"{a.vllm_url}/v1/models", timeout=10).json()
    model = models["data"][0]["id"]
    report["vllm_url"], report["served_model"] = a.vllm_url, model
    try:
        report["vllm_version"] = httpx.get(f"{a.vllm_url}/version", timeout=10).json().get("version")
    except Exception:  # noqa: BLE001 - informative only
        pass
    warm = [page_image(900_000 + i, a.width, a.height) for i in range(2)]
    asyncio.run(vllm_config(a.vllm_url, model, warm, 8, 2))
    for bs, n in zip(sizes, counts):
        images = [page_image(seed_of(bs, i), a.width, a.height) for i in range(n)]
        say(f"vLLM, {bs} in flight: {n} pages x {a.max_new_tokens} tokens ...")
        r = asyncio.run(vllm_config(a.vllm_url, model, images, a.max_new_tokens, bs))
        report["results"][str(bs)] = r
        save()
        say(f"vLLM, {bs} in flight: {json.dumps(r)}")


def _sync(engine):
    """Waits for the GPU (nothing to wait for on the CPU)."""
    return engine._torch.cuda.synchronize if engine.device.startswith("cuda") else (lambda: None)


def profile_phases(engine, a, out: Path) -> dict:
    """Where one page's time goes: input preparation (CPU), prefill (generate 1 token), a decoding
    step; and a torch.profiler table of a short generation (batch 1)."""
    torch = engine._torch
    sampling = _greedy()
    img = page_image(700_000, a.width, a.height)
    res: dict = {"attn_implementation": getattr(engine.model.config, "_attn_implementation", None)}

    sync = _sync(engine)

    def timed(fn):
        sync()
        t = time.perf_counter()
        v = fn()
        sync()
        return time.perf_counter() - t, v

    for bs in (1, 8):
        prep_s, inputs = timed(lambda bs=bs: engine.prepare([img] * bs))
        inputs = engine.to_device(inputs)

        def gen(n, inputs=inputs, bs=bs):
            with torch.inference_mode():
                return engine.model.generate(**inputs, generation_config=engine._generation_config(sampling, n))

        timed(lambda: gen(2))  # warm
        prefill_s, _ = timed(lambda: gen(1))
        t65, _ = timed(lambda: gen(65))
        res[f"batch_{bs}"] = {
            "prepare_s": round(prep_s, 3),
            "prefill_s": round(prefill_s, 3),
            "decode_step_ms": round((t65 - prefill_s) / 64 * 1000, 1),
        }
        say(f"phases, batch {bs}: {res[f'batch_{bs}']}")
        if bs == 1:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                wall, _ = timed(lambda: gen(17))
            ka = prof.key_averages()
            # GPU busy time: the kernels' own time (operator rows repeat their kernels' time, so count only
            # rows on the device)
            from torch.autograd import DeviceType

            cuda_us = sum(e.self_device_time_total for e in ka if e.device_type == DeviceType.CUDA)
            launches = sum(e.count for e in ka if e.key in ("cudaLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel"))
            res["profile_batch_1_17_tokens"] = {
                "wall_s": round(wall, 3),
                "gpu_kernel_s": round(cuda_us / 1e6, 3),
                "kernel_launches": launches,
            }
            (out / "profile.txt").write_text(
                "by self GPU time\n"
                + ka.table(sort_by="self_cuda_time_total", row_limit=25)
                + "\n\nby CPU time\n"
                + ka.table(sort_by="cpu_time_total", row_limit=25)
            )
            say(f"profile: {res['profile_batch_1_17_tokens']}")
    return res


def cache_experiment(engine, a, bs: int, n_tokens: int) -> dict:
    """generate() at batch `bs`, `n_tokens` tokens: dynamic KV cache, then static (compiled on CUDA), two
    generations each on the same inputs; the second of each is the steady figure."""
    torch = engine._torch
    sampling = _greedy()
    images = [page_image(800_000 + i, a.width, a.height) for i in range(bs)]
    inputs = engine.to_device(engine.prepare(images))
    res: dict = {"batch": bs, "tokens": n_tokens}
    sync = _sync(engine)
    for static in (False, True):
        engine.static_cache = static
        times = []
        for _ in range(2):
            sync()
            t = time.perf_counter()
            with torch.inference_mode():
                out = engine.model.generate(**inputs, generation_config=engine._generation_config(sampling, n_tokens))
            sync()
            times.append(round(time.perf_counter() - t, 2))
        key = "static" if static else "dynamic"
        res[key] = {
            "seconds": times,
            "new_tokens": int(out.shape[1] - inputs["input_ids"].shape[1]),
            "pages_per_s_steady": round(bs / times[-1], 4),
        }
        say(f"cache experiment {key}: {res[key]}")
    engine.static_cache = False
    return res
