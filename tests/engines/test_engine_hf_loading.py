"""Engine hf on CPU, loading and wiring: create_engine by name, checkpoints (a local folder, the Hub offline),
devices, the static cache, and the pipeline and `convert --engine hf` with the tiny Qwen3-VL model of
tests.support.hf_tiny."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from PIL import Image, ImageDraw  # noqa: E402

from ocrserve.engines import EngineError, create_engine  # noqa: E402
from ocrserve.engines.hf import HFEngine, resolve_checkpoint, resolve_device  # noqa: E402
from tests.support.hf_tiny import GOOD, _page, _profile, script_model  # noqa: E402
from tests.support.hf_tiny import one_torch_thread as one_torch_thread  # noqa: E402
from tests.support.hf_tiny import tiny_model_dir as tiny_model_dir  # noqa: E402


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
