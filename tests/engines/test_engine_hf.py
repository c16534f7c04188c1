"""Engine hf on CPU with a tiny random Qwen3-VL model built from a config.

The tokenizer, chat template and image processor settings are the real Qwen files of the
chandra1-shape folder in shared/gpu/models (no weights there); the model is a 2-layer, hidden-64
Qwen3-VL with the same vocabulary, saved to a temporary folder and loaded the way a checkpoint is.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tarfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from PIL import Image, ImageDraw  # noqa: E402
from transformers import LogitsProcessor, LogitsProcessorList  # noqa: E402

from ocrserve.bench.shape_tokenizer import renumber_added_tokens  # noqa: E402
from ocrserve.engines import EngineError, PageInput, create_engine  # noqa: E402
from ocrserve.engines.hf import HFEngine, resolve_checkpoint, resolve_device  # noqa: E402
from ocrserve.parse import parse_output  # noqa: E402
from ocrserve.profiles import load_profile  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHAPE_TAR = next(
    (
        p
        for p in (
            REPO.parent / "shared/gpu/models/chandra1-shape.tar.xz",
            Path("/work/shared/gpu/models/chandra1-shape.tar.xz"),
        )
        if p.is_file()
    ),
    None,
)
QWEN_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.json", "generation_config.json"]
GOOD = '<div data-bbox="[10, 20, 500, 80]" data-label="Text"><p>Hello tiny model</p></div>'
# the tiny model: Chandra 1's architecture (Qwen3-VL) at these sizes, each config section's
TINY = {
    "text_config": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
    "vision_config": {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 64,
        "deepstack_visual_indexes": [1],
        "num_position_embeddings": 64,
    },
}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # a tiny model gains nothing from threads, and on a busy 2-core machine they spin against each other
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    assert SHAPE_TAR is not None, "shared/gpu/models/chandra1-shape.tar.xz is needed beside the repository"
    out = tmp_path_factory.mktemp("tiny-qwen3vl")
    with tarfile.open(SHAPE_TAR) as tar:
        members = [
            m for m in tar.getmembers() if Path(m.name).name in QWEN_FILES + ["config.json", "preprocessor_config.json"]
        ]
        tar.extractall(out / "src", members=members, filter="data")
    src = next((out / "src").rglob("config.json")).parent
    for name in QWEN_FILES:
        shutil.copy(src / name, out / name)
    pre = json.loads((src / "preprocessor_config.json").read_text())
    pre["size"] = {"shortest_edge": 32 * 32, "longest_edge": 96 * 96}  # tiny images: a few image tokens
    (out / "preprocessor_config.json").write_text(json.dumps(pre))

    cfg = json.loads((src / "config.json").read_text())
    for section, sizes in TINY.items():
        cfg[section].update(sizes)
    cfg["text_config"]["rope_scaling"]["mrope_section"] = [4, 2, 2]
    for k in ("architectures", "model_type", "torch_dtype", "dtype"):
        cfg.pop(k, None)
    torch.manual_seed(0)
    model = transformers.Qwen3VLForConditionalGeneration(transformers.Qwen3VLConfig(**cfg))
    model.save_pretrained(out)
    shutil.rmtree(out / "src")
    return out


def _profile(**update):
    return load_profile("chandra-1").model_copy(update=update)


def _page(i: int, size=(64, 64)) -> PageInput:
    img = Image.new("RGB", size, "white")
    ImageDraw.Draw(img).rectangle([4, 4, 4 + 7 * i, 20], fill="black")
    return PageInput(doc_id="doc", index=i, image=img, unit="px", source_type="png")


class Scripted(LogitsProcessor):
    """Forces each row to write the given token ids, then end-of-sequence."""

    def __init__(self, scripts: list[list[int]], eos: int, prompt_len: int):
        self.scripts, self.eos, self.prompt_len = scripts, eos, prompt_len

    def __call__(self, input_ids, scores):
        pos = input_ids.shape[1] - self.prompt_len
        forced = torch.full_like(scores, float("-inf"))
        for row in range(scores.shape[0]):
            script = self.scripts[row % len(self.scripts)]
            if pos >= len(script) and scores[row, self.eos] == float("-inf"):
                forced[row] = scores[row]  # end-of-sequence is masked (min_new_tokens): let the model go on
            else:
                forced[row, script[pos] if pos < len(script) else self.eos] = 0.0
        return forced


def script_model(engine: HFEngine, texts_per_call: list[list[str]]):
    """Make the model write texts_per_call[k] (one text per row, cycled) in its k-th generate() call."""
    original = engine.model.generate
    calls = []

    def generate(**kwargs):
        texts = texts_per_call[min(len(calls), len(texts_per_call) - 1)]
        calls.append(kwargs["input_ids"].shape[0])
        scripts = [engine.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        proc = Scripted(scripts, engine.eos_ids[0], kwargs["input_ids"].shape[1])
        return original(**kwargs, logits_processor=LogitsProcessorList([proc]))

    engine.model.generate = generate
    return calls


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    eng = HFEngine(_profile(max_retries=1), checkpoint=str(tiny_model_dir), device="cpu", batch_size=4, max_tokens=12)
    yield eng
    asyncio.run(eng.aclose())


@pytest.fixture
def fresh_generate(engine):
    original = engine.model.generate
    engine.batch_size, engine.max_tokens = 4, 12
    yield engine
    engine.model.generate = original
    engine.batch_size, engine.max_tokens = 4, 12


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


def test_create_engine_by_name(tiny_model_dir):
    eng = create_engine("hf", _profile(), checkpoint=str(tiny_model_dir), device="cpu", batch_size=2)
    assert isinstance(eng, HFEngine) and eng.capacity() == 4 and eng.dtype == torch.float32
    # benchmarks: weights drawn from the config (like vLLM's --load-format dummy), dtype as asked
    rnd = HFEngine(_profile(), checkpoint=str(tiny_model_dir), device="cpu", dtype="bf16", random_weights=True)
    assert rnd.model.dtype == torch.bfloat16
    saved, drawn = eng.model.lm_head.weight, rnd.model.lm_head.weight
    assert saved.shape == drawn.shape and not torch.equal(saved.to(torch.bfloat16), drawn)
    with pytest.raises(EngineError, match="unsupported dtype"):
        HFEngine(_profile(), checkpoint=str(tiny_model_dir), device="cpu", dtype="int3")


def test_missing_local_folder(tmp_path):
    with pytest.raises(EngineError, match="does not exist"):
        HFEngine(_profile(), checkpoint=str(tmp_path / "nope"), device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EngineError, match="no config.json"):
        resolve_checkpoint(str(tmp_path / "empty"))


def test_hub_checkpoint_offline_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(EngineError, match="not in the local Hugging Face cache.*offline"):
        HFEngine(_profile(checkpoint="datalab-to/no-such-model"), device="cpu")


def test_invalid_hub_id():
    with pytest.raises(EngineError, match="does not exist"):
        resolve_checkpoint("not a//valid id")


def test_unsupported_devices():
    if not torch.cuda.is_available():
        with pytest.raises(EngineError, match="cuda.*not available"):
            resolve_device("cuda")
    with pytest.raises(EngineError, match="unsupported device 'tpu'"):
        resolve_device("tpu")
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(None) in ("cuda", "mps", "cpu")


def test_convert_through_the_pipeline_with_engine_hf(tiny_model_dir, tmp_path, monkeypatch):
    import ocrserve

    original_load = HFEngine._load

    def load_then_script(self, folder, random_weights):
        original_load(self, folder, random_weights)
        script_model(self, [[GOOD]])

    monkeypatch.setattr(HFEngine, "_load", load_then_script)
    sources = []
    for name, size in (("a.png", (200, 100)), ("b.png", (120, 160))):
        img = Image.new("RGB", size, "white")
        ImageDraw.Draw(img).text((10, 10), name, fill="black")
        img.save(tmp_path / name)
        sources.append(str(tmp_path / name))
    results = ocrserve.convert(
        sources,
        output_dir=tmp_path / "out",
        engine="hf",
        checkpoint=str(tiny_model_dir),
        device="cpu",
        batch_size=2,
        max_tokens=64,
        fallback=False,
        render_workers=1,
    )
    docs = [r.document for r in results]
    assert len(docs) == 2
    for doc, size in zip(docs, ((200, 100), (120, 160))):
        page = doc.pages[0]
        assert page.status == "ok" and page.engine == "hf"
        assert [b.label for b in page.blocks] == ["Text"] and "Hello tiny model" in page.blocks[0].text
        x0, y0, x1, y1 = page.blocks[0].bbox  # [10, 20, 500, 80] of 1024, in image pixels
        assert x0 == pytest.approx(10 / 1024 * size[0], abs=1) and y1 == pytest.approx(80 / 1024 * size[1], abs=1)
    assert "Hello tiny model" in (tmp_path / "out" / "a" / "a.md").read_text()


async def test_static_cache_writes_what_the_dynamic_cache_writes(tiny_model_dir):
    # `--compile`: a preallocated KV cache (compiled on CUDA); greedy answers must not change, also for a
    # left-padded batch of pages of different sizes
    pages = [_page(0, (64, 64)), _page(1, (96, 64)), _page(2, (64, 32))]
    answers = {}
    for static in (False, True):
        eng = HFEngine(
            _profile(),
            checkpoint=str(tiny_model_dir),
            device="cpu",
            batch_size=3,
            max_tokens=10,
            ignore_eos=True,
            static_cache=static,
        )
        calls = []
        original = eng.model.generate

        def generate(calls=calls, original=original, **kwargs):
            calls.append(kwargs["generation_config"].cache_implementation)
            return original(**kwargs)

        eng.model.generate = generate
        results = await asyncio.gather(*(eng.ocr(p) for p in pages))
        await eng.aclose()
        assert calls == ["static" if static else None]
        assert all(r.completion_tokens == 10 for r in results)
        answers[static] = [r.raw for r in results]
    assert answers[True] == answers[False]
    assert len(set(answers[False])) > 1  # the pages differ, and so do the random model's answers


def test_convert_cli_compile_option_reaches_the_engine(tiny_model_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ocrserve.cli import app

    seen = {}
    original_init = HFEngine.__init__

    def init(self, profile, options=None, **kwargs):
        seen.update(options.model_dump() if options is not None else kwargs)  # create_engine hands HFOptions
        original_init(self, profile, options, **kwargs)
        script_model(self, [[GOOD]])

    monkeypatch.setattr(HFEngine, "__init__", init)
    Image.new("RGB", (80, 60), "white").save(tmp_path / "p.png")
    res = CliRunner().invoke(
        app,
        [
            "convert",
            str(tmp_path / "p.png"),
            "-o",
            str(tmp_path / "out"),
            "--engine",
            "hf",
            "--checkpoint",
            str(tiny_model_dir),
            "--device",
            "cpu",
            "--compile",
            "--no-fallback",
            "--quiet",
            "--render-workers",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    assert seen.get("static_cache") is True
    assert "Hello tiny model" in (tmp_path / "out" / "p" / "p.md").read_text()


@pytest.fixture(scope="module")
def tiny_qwen35_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """Chandra 2's architecture (Qwen3.5: linear-attention and full-attention layers, its vision tower),
    tiny and random, with Chandra 2's special token ids and vocabulary size. The Qwen3.5 tokenizer is not in
    reach here: the Qwen2 BPE of the Chandra 1 folder is renumbered to the ids of bench/models/chandra2-shape,
    as the serving sweep does for that folder."""
    if not hasattr(transformers, "Qwen3_5ForConditionalGeneration"):
        pytest.fail(f"transformers {transformers.__version__} has no Qwen3.5 (Chandra 2) model")
    out = tmp_path_factory.mktemp("tiny-qwen35")
    shape = REPO / "bench/models/chandra2-shape"
    shutil.copy(tiny_model_dir / "tokenizer.json", out / "tokenizer.json")
    shutil.copy(tiny_model_dir / "preprocessor_config.json", out / "preprocessor_config.json")
    for name in ("tokenizer_config.json", "generation_config.json", "chat_template.json"):
        shutil.copy(shape / name, out / name)
    assert renumber_added_tokens(out) > 0
    real = json.loads((shape / "config.json").read_text())
    ids = {k: real[k] for k in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")}
    cfg = transformers.Qwen3_5Config(
        text_config={
            "vocab_size": real["text_config"]["vocab_size"],
            **TINY["text_config"],
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "layer_types": ["linear_attention", "full_attention"],
            "rope_parameters": {
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.25,
                "rope_type": "default",
                "mrope_section": [1, 1, 0],
                "mrope_interleaved": True,
            },
        },
        # the same sizes as Chandra 1's tiny model; Qwen3.5's vision has no deepstack layers
        vision_config={k: v for k, v in TINY["vision_config"].items() if k != "deepstack_visual_indexes"},
        **ids,
    )
    torch.manual_seed(0)
    transformers.Qwen3_5ForConditionalGeneration(cfg).save_pretrained(out)
    return out


def test_the_chandra2_shape_tokenizer_speaks_chandra2s_ids(tiny_qwen35_dir, tiny_model_dir):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_qwen35_dir)
    real = json.loads((REPO / "bench/models/chandra2-shape/config.json").read_text())
    gen = json.loads((REPO / "bench/models/chandra2-shape/generation_config.json").read_text())
    assert tok.convert_tokens_to_ids("<|image_pad|>") == real["image_token_id"] == 248056
    assert tok.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"]) == [
        real["vision_start_token_id"],
        real["vision_end_token_id"],
    ]
    assert tok.convert_ids_to_tokens(gen["eos_token_id"]) == ["<|im_end|>", "<|endoftext|>"]
    assert tok.eos_token_id == gen["eos_token_id"][0] and len(tok) <= real["text_config"]["vocab_size"]
    # the words of the prompt are Qwen2's BPE, unchanged
    qwen2 = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "OCR this image to HTML, arranged as layout blocks."
    assert tok(text)["input_ids"] == qwen2(text)["input_ids"]


@pytest.mark.parametrize("arch", ["chandra-1 / qwen3_vl", "chandra-2 / qwen3_5"])
def test_left_padding_leaves_each_pages_logits_as_alone(arch, tiny_model_dir, tiny_qwen35_dir):
    # a page batched with a larger one is left-padded; what the model predicts for it must not change
    # (the Qwen3.5 linear-attention layers must ignore the padding too)
    profile, folder = ("chandra-1", tiny_model_dir) if "qwen3_vl" in arch else ("chandra-2", tiny_qwen35_dir)
    eng = HFEngine(
        _profile() if profile == "chandra-1" else load_profile("chandra-2"),
        checkpoint=str(folder),
        device="cpu",
        dtype="fp32",
        batch_size=2,
        max_tokens=4,
    )
    assert eng.model_type == ("qwen3_vl" if profile == "chandra-1" else "qwen3_5")
    small, large = _page(1, (64, 64)).image, _page(2, (96, 64)).image

    def last_logits(images):
        inputs = eng.prepare(images)
        with torch.inference_mode():
            return eng.model(**inputs).logits[:, -1].float(), inputs["attention_mask"]

    alone, _ = last_logits([small])
    other, _ = last_logits([large])
    batched, mask = last_logits([small, large])
    assert int((mask[0] == 0).sum()) == 2  # the small page is padded
    assert torch.allclose(batched[0], alone[0], atol=1e-5)
    assert (alone[0] - other[0]).abs().max() > 1e-4  # the pages do lead to different predictions


async def test_chandra2_architecture_runs_batches_end_to_end(tiny_qwen35_dir):
    eng = HFEngine(
        load_profile("chandra-2").model_copy(update={"max_retries": 0}),
        checkpoint=str(tiny_qwen35_dir),
        device="cpu",
        batch_size=3,
        max_tokens=12,
        ignore_eos=True,
    )
    try:
        pages = [_page(0, (64, 64)), _page(1, (96, 64)), _page(2, (64, 32))]
        results = await asyncio.gather(*(eng.ocr(p) for p in pages))
    finally:
        await eng.aclose()
    assert sorted(r.extra["batch_sizes"][0] for r in results) == [3, 3, 3]
    for r, p in zip(results, pages):
        assert r.ok and r.completion_tokens == 12 and r.prompt_tokens > 0
        page = parse_output(r.raw, load_profile("chandra-2"), p.image.size, unit="px")  # whatever it wrote
        assert page.index == 0


@pytest.mark.parametrize("arch", ["qwen3_vl", "qwen3_5"])
async def test_im_end_stops_an_answer_when_the_generation_config_names_only_endoftext(
    arch, tiny_model_dir, tiny_qwen35_dir, tmp_path
):
    """Chandra 2's generation config ends answers at <|endoftext|> alone while the model closes its turn with
    <|im_end|>: as chandra-ocr 0.2.0's transformers path, the engine adds <|im_end|> to the stop ids generate() gets."""
    src = tiny_model_dir if arch == "qwen3_vl" else tiny_qwen35_dir
    folder = tmp_path / "model"
    shutil.copytree(src, folder)
    tok = transformers.AutoTokenizer.from_pretrained(src)
    im_end, endoftext = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    for name, key, value in [
        ("generation_config.json", "eos_token_id", endoftext),
        ("tokenizer_config.json", "eos_token", "<|endoftext|>"),
    ]:
        data = json.loads((folder / name).read_text())
        data[key] = value
        (folder / name).write_text(json.dumps(data))
    profile = load_profile("chandra-1" if arch == "qwen3_vl" else "chandra-2").model_copy(update={"max_retries": 0})
    eng = HFEngine(profile, checkpoint=str(folder), device="cpu", batch_size=1, max_tokens=4)
    seen: list[list[int]] = []
    original = eng.model.generate

    def generate(**kwargs):
        seen.append(list(kwargs["generation_config"].eos_token_id))
        return original(**kwargs)

    eng.model.generate = generate
    try:
        assert eng.model.generation_config.eos_token_id == endoftext and eng.tokenizer.eos_token_id == endoftext
        await eng.ocr(_page(0))
    finally:
        await eng.aclose()
    assert seen and all(im_end in ids and endoftext in ids for ids in seen), seen
