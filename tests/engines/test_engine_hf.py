"""Engine hf on CPU with a tiny random Qwen3-VL model built from a config.

The tokenizer, chat template and image processor settings are the real Qwen files of the
chandra1-shape folder in shared/gpu/models (no weights there); the model is a 2-layer, hidden-64
Qwen3-VL with the same vocabulary, saved to a temporary folder and loaded the way a checkpoint is.
"""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ocrserve.engines.hf import HFEngine  # noqa: E402
from ocrserve.parse import parse_output  # noqa: E402
from tests.support.hf_tiny import GOOD, _page, _profile, script_model  # noqa: E402
from tests.support.hf_tiny import engine as engine  # noqa: E402
from tests.support.hf_tiny import fresh_generate as fresh_generate  # noqa: E402
from tests.support.hf_tiny import one_torch_thread as one_torch_thread  # noqa: E402
from tests.support.hf_tiny import tiny_model_dir as tiny_model_dir  # noqa: E402


def test_prepare_uses_prompt_and_expands_image_tokens(engine):
    images = [_page(0, (64, 64)).image, _page(1, (96, 64)).image]
    inputs = engine.prepare(images)
    ids = inputs["input_ids"]
    assert ids.shape[0] == 2
    grid = inputs["image_grid_thw"]
    for row in range(2):
        n_image = int((ids[row] == engine.image_token_id).sum())
        assert n_image == int(grid[row].prod()) // 4
    # left padding: the shorter prompt is padded at the start, the last tokens line up
    assert inputs["attention_mask"][0, 0] == 0 and inputs["attention_mask"][:, -1].all()
    text = engine.tokenizer.decode(ids[1], skip_special_tokens=False)
    user_turn = text.split("<|vision_end|>", 1)[1].split("<|im_end|>", 1)[0]
    assert user_turn == engine.profile.prompt  # byte for byte, after the image
    assert text.rstrip().endswith("<|im_start|>assistant")


async def test_batch_of_pages_of_different_sizes_end_to_end(fresh_generate):
    engine = fresh_generate
    engine.max_tokens = 64
    calls = script_model(engine, [[GOOD, GOOD.replace("Hello", "Bye")]])
    sizes = [(64, 64), (96, 64), (64, 96), (32, 64), (64, 32)]
    results = await asyncio.gather(*(engine.ocr(_page(i, s)) for i, s in enumerate(sizes)))
    assert calls == [4, 1]  # 5 pages at batch size 4
    assert sorted(r.extra["batch_sizes"][0] for r in results) == [1, 4, 4, 4, 4]
    for r in results:
        assert r.ok and r.finish_reason == "stop" and r.attempts == 1
        assert r.raw in (GOOD, GOOD.replace("Hello", "Bye"))
        assert r.completion_tokens == len(engine.tokenizer.encode(r.raw)) + 1  # the text and end-of-sequence
        page = parse_output(r.raw, _profile(), (64.0, 64.0), unit="px")
        assert [b.label for b in page.blocks] == ["Text"] and "tiny model" in page.blocks[0].html
    alone = [int(engine.prepare([_page(i, s).image])["attention_mask"].sum()) for i, s in enumerate(sizes)]
    assert [r.prompt_tokens for r in results] == alone  # padding is not counted
    assert alone[1] - alone[0] == 2  # 96x64 is 6 merged patches, 64x64 is 4


async def test_random_model_output_cut_off_is_kept_after_one_attempt(fresh_generate):
    engine = fresh_generate
    results = await asyncio.gather(*(engine.ocr(_page(i)) for i in range(3)))
    for r in results:
        assert r.ok and r.attempts == 1 and r.finish_reason == "length"  # kept, as chandra-ocr keeps it
        assert "cut off at max_tokens=12" in r.error
        assert r.extra["completion_tokens_per_attempt"] == [12] and r.completion_tokens == 12
        parse_output(r.raw, _profile(), truncated=True)  # whatever the random model wrote


async def test_ignore_eos_runs_the_full_budget_without_retries(fresh_generate):
    engine = fresh_generate
    engine.ignore_eos, engine.max_tokens = True, 20
    try:
        script_model(engine, [["<p>short</p>"]])  # would stop after a few tokens
        r = await engine.ocr(_page(0))
    finally:
        engine.ignore_eos = False
    assert r.ok and r.attempts == 1 and r.finish_reason == "length" and r.completion_tokens == 20
    assert r.raw.startswith("<p>short</p>")


async def test_repetition_loop_retried_with_retry_sampling(fresh_generate):
    engine = fresh_generate
    loop_text = "<p>" + "ab " * 150
    engine.max_tokens = 400
    seen = []
    original = engine._generation_config

    def spy(sampling, n):
        seen.append((sampling.temperature, sampling.top_p))
        return original(sampling, n)

    engine._generation_config = spy
    try:
        script_model(engine, [[loop_text], [GOOD]])
        r = await engine.ocr(_page(0))
    finally:
        del engine._generation_config
    assert r.ok and r.attempts == 2 and r.raw == GOOD and "repetition loop" in r.error
    assert r.extra["retry_sampling"] is True
    assert seen == [(0.0, 0.1), (0.3, 0.95)]


async def test_streaming_deltas_join_to_the_answer(fresh_generate):
    engine = fresh_generate
    texts = [GOOD + "\n<p>Ünïcödé ✓ 表</p>", GOOD]
    engine.max_tokens = 64
    script_model(engine, [texts])
    streams: dict[int, list[str]] = {0: [], 1: []}

    async def collect_async(d):
        streams[0].append(d)

    results = await asyncio.gather(
        engine.ocr(_page(0), on_delta=collect_async), engine.ocr(_page(1), on_delta=streams[1].append)
    )
    for i, r in enumerate(results):
        assert r.ok
        assert len(streams[i]) > 3  # piece by piece, not one block at the end
        assert "".join(streams[i]) == r.raw
    assert results[0].raw == texts[0]


async def test_streaming_a_retried_page_starts_over_with_an_empty_delta(fresh_generate):
    engine = fresh_generate
    engine.max_tokens = 400
    script_model(engine, [["<p>" + "the same words again " * 80], [GOOD]])  # a loop up to the limit, then a good answer
    pieces: list[str] = []
    r = await engine.ocr(_page(0), on_delta=pieces.append)
    assert r.ok and r.attempts == 2 and r.raw == GOOD
    restart = pieces.index("")
    assert "".join(pieces[:restart]).startswith("<p>the same words again") and "".join(pieces[restart + 1 :]) == GOOD


async def test_failing_delta_callback_does_not_fail_the_page(fresh_generate):
    engine = fresh_generate
    engine.max_tokens = 64
    script_model(engine, [[GOOD]])

    def broken(piece):
        raise RuntimeError("consumer went away")

    r = await engine.ocr(_page(0), on_delta=broken)
    assert r.ok and r.raw == GOOD


def oom_above(engine: HFEngine, limit: int, error=None, stream_first: str | None = None) -> list[int]:
    """Make generate() run out of memory for batches larger than `limit` (after streaming `stream_first`
    to every row, as a real out-of-memory error can come mid-answer); the sizes of all calls are logged."""
    inner = engine.model.generate
    sizes: list[int] = []

    def generate(**kwargs):
        n = kwargs["input_ids"].shape[0]
        sizes.append(n)
        if n > limit:
            streamer = kwargs.get("streamer")
            if stream_first and streamer is not None:
                streamer.put(kwargs["input_ids"])  # the prompt, as generate() does
                for tok in engine.tokenizer.encode(stream_first, add_special_tokens=False):
                    streamer.put(torch.full((n, 1), tok))
            raise error or torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return inner(**kwargs)

    engine.model.generate = generate
    return sizes


async def test_out_of_memory_batch_is_retried_at_half_size(fresh_generate):
    engine = fresh_generate
    engine.max_tokens = 64
    script_model(engine, [[GOOD]])
    sizes = oom_above(engine, 1)
    results = await asyncio.gather(*(engine.ocr(_page(i)) for i in range(4)))
    assert sizes == [4, 2, 1, 1, 1, 1]  # 4 runs out, 2 runs out, then one page at a time
    for r in results:
        assert r.ok and r.raw == GOOD and r.attempts == 1, r.error
        assert r.extra["batch_sizes"] == [1] and r.extra["out_of_memory_at"] in ([4, 2], [4])
    assert sorted(len(r.extra["out_of_memory_at"]) for r in results) == [1, 1, 2, 2]
    assert engine.batch_size == 1 and engine.capacity() == 2  # later batches start small
    sizes.clear()
    more = await asyncio.gather(*(engine.ocr(_page(i)) for i in range(2)))
    assert all(r.ok for r in more) and sizes == [1, 1]


async def test_out_of_memory_retry_stops_halving_where_the_batch_fits(fresh_generate):
    engine = fresh_generate
    engine.max_tokens = 64
    script_model(engine, [[GOOD]])
    sizes = oom_above(engine, 2, error=RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    results = await asyncio.gather(*(engine.ocr(_page(i)) for i in range(4)))
    assert sizes == [4, 2, 2] and engine.batch_size == 2
    assert all(r.ok and r.raw == GOOD and r.extra["batch_sizes"] == [2] for r in results)


async def test_out_of_memory_retry_streams_a_fresh_start(fresh_generate):
    engine = fresh_generate
    engine.max_tokens = 64
    script_model(engine, [[GOOD]])
    oom_above(engine, 1, stream_first="<p>partial")
    streams: list[list[str]] = [[], []]
    results = await asyncio.gather(*(engine.ocr(_page(i), on_delta=streams[i].append) for i in range(2)))
    for r, pieces in zip(results, streams):
        assert r.ok and r.raw == GOOD
        restart = pieces.index("")  # the text of the batch that ran out of memory is discarded
        assert "".join(pieces[:restart]) == "<p>partial" and "".join(pieces[restart + 1 :]) == GOOD


async def test_out_of_memory_single_page_fails_naming_batch_and_page_size(fresh_generate):
    engine = fresh_generate
    sizes = oom_above(engine, 0)
    results = await asyncio.gather(engine.ocr(_page(0, (64, 96))), engine.ocr(_page(1, (96, 64))))
    assert sizes == [2, 1, 1] and engine.batch_size == 1
    for r, size in zip(results, ("64x96", "96x64")):
        assert not r.ok and r.finish_reason == "error" and r.attempts == 1
        assert "out of memory" in r.error and "batch size 1" in r.error and f"{size} px" in r.error
        assert r.extra["out_of_memory_at"] == [2, 1]


async def test_other_generate_errors_are_not_retried(fresh_generate):
    engine = fresh_generate
    sizes = oom_above(engine, 0, error=RuntimeError("CUDA error: device-side assert triggered"))
    results = await asyncio.gather(*(engine.ocr(_page(i)) for i in range(2)))
    assert sizes == [2] and engine.batch_size == 4
    assert all(not r.ok and "device-side assert" in r.error for r in results)
