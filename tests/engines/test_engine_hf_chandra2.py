"""Engine hf on CPU with Chandra 2's architecture (Qwen3.5), tiny and random: its shape tokenizer's ids, left
padding, batches end to end, and <|im_end|> ending an answer (the tiny Qwen3-VL model: tests.support.hf_tiny)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ocrserve.bench.shape_tokenizer import renumber_added_tokens  # noqa: E402
from ocrserve.engines.hf import HFEngine  # noqa: E402
from ocrserve.parse import parse_output  # noqa: E402
from ocrserve.profiles import load_profile  # noqa: E402
from tests.support.hf_tiny import REPO, TINY, _page, _profile  # noqa: E402
from tests.support.hf_tiny import one_torch_thread as one_torch_thread  # noqa: E402
from tests.support.hf_tiny import tiny_model_dir as tiny_model_dir  # noqa: E402


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
