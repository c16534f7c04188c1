"""The hf engine tests' tiny random Qwen3-VL model built from a config (module fixtures), its engine, and a
model scripted to write given texts.

The tokenizer, chat template and image processor settings are the real Qwen files of the
chandra1-shape folder in shared/gpu/models (no weights there); the model is a 2-layer, hidden-64
Qwen3-VL with the same vocabulary, saved to a temporary folder and loaded the way a checkpoint is."""

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

from ocrserve.engines import PageInput  # noqa: E402
from ocrserve.engines.hf import HFEngine  # noqa: E402
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


_MADE: list[Path] = []  # the tiny model's folder, made once a test process (three modules use it; none writes to it)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    if _MADE and _MADE[0].is_dir():
        return _MADE[0]
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
    _MADE[:] = [out]
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
