"""A sweep config's borrowed tokenizer: renumbered to the model folder's own special ids, left alone when it has
them already, and the ids it cannot take named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocrserve.bench.sweep import resolve_model
from ocrserve.bench.sweep_spec import SweepConfig


def _borrowed_tokenizer(folder: Path) -> None:
    """A small BPE tokenizer with its added tokens right after its vocabulary (as Qwen2's are)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={"[UNK]": 0, "a": 1, "b": 2, "ab": 3}, merges=[("a", "b")], unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|endoftext|>", "<|im_end|>", "<|image_pad|>", "<think>"])
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))


def _shape_folder(folder: Path, special: dict[int, str], **flags: dict) -> None:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_5"}))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "added_tokens_decoder": {
                    str(i): {"content": c, "special": True, **flags.get(c.strip("<|>"), {})} for i, c in special.items()
                }
            }
        )
    )


def test_a_borrowed_tokenizer_produces_the_model_folders_own_special_ids(tmp_path):
    from tokenizers import Tokenizer

    _borrowed_tokenizer(tmp_path / "qwen2")
    assert Tokenizer.from_file(str(tmp_path / "qwen2/tokenizer.json")).token_to_id("<|image_pad|>") == 6
    _shape_folder(
        tmp_path / "shape",
        {100: "<|endoftext|>", 101: "<|im_end|>", 102: "<|image_pad|>", 103: "<|new|>"},
        im_end={"special": False},
    )
    cfg = SweepConfig(name="c2", model=str(tmp_path / "shape"), tokenizer_from=str(tmp_path / "qwen2"))
    dest = Path(resolve_model(cfg, None, tmp_path / "work"))
    tok = Tokenizer.from_file(str(dest / "tokenizer.json"))
    assert [tok.token_to_id(t) for t in ("<|endoftext|>", "<|im_end|>", "<|image_pad|>", "<|new|>")] == [
        100,
        101,
        102,
        103,
    ]
    assert tok.token_to_id("<think>") == 104  # one the folder does not name follows
    assert tok.encode("ab b <|image_pad|><|im_end|>").ids == [3, 2, 102, 101]  # the vocabulary's ids stay
    assert tok.get_vocab_size() == 105
    # the folder's flags win: <|im_end|> is no special token there, <|image_pad|> is
    assert tok.decode([3, 101, 102], skip_special_tokens=True) == "ab <|im_end|>"
    # the filler up to the first special id: four letters a token, and text never encodes to them
    fill = [tok.id_to_token(i) for i in range(4, 100)]
    assert len(set(fill)) == 96 and all(len(w) == 4 and w.isalpha() for w in fill)
    assert not [i for i in tok.encode(" ".join(fill)).ids if 4 <= i < 100]
    # the borrowed folder is left as it was
    assert Tokenizer.from_file(str(tmp_path / "qwen2/tokenizer.json")).token_to_id("<|image_pad|>") == 6


def test_a_borrowed_tokenizer_that_has_the_ids_already_is_left_alone(tmp_path):
    from ocrserve.bench.shape_tokenizer import renumber_added_tokens

    _borrowed_tokenizer(tmp_path / "qwen2")
    before = (tmp_path / "qwen2/tokenizer.json").read_text()
    (tmp_path / "qwen2/tokenizer_config.json").write_text(
        json.dumps(
            {
                "added_tokens_decoder": {
                    "0": {"content": "[UNK]"},
                    "4": {"content": "<|endoftext|>"},
                    "6": {"content": "<|image_pad|>"},
                }
            }
        )
    )
    assert renumber_added_tokens(tmp_path / "qwen2") == 0
    assert (tmp_path / "qwen2/tokenizer.json").read_text() == before


@pytest.mark.parametrize(
    "special, error",
    [
        ({1: "<|endoftext|>", 2: "<|im_end|>"}, "inside the borrowed vocabulary"),
        ({100: "<|endoftext|>", 102: "<|im_end|>"}, "one contiguous run"),
        ({100: "<|endoftext|>", 101: "ab"}, "words of the borrowed vocabulary"),
        ({100: "<|endoftext|>", 101: "<|endoftext|>"}, "named twice"),
    ],
)
def test_special_ids_a_borrowed_tokenizer_cannot_take_are_named(tmp_path, special, error):
    _borrowed_tokenizer(tmp_path / "qwen2")
    _shape_folder(tmp_path / "shape", special)
    cfg = SweepConfig(name="c2", model=str(tmp_path / "shape"), tokenizer_from=str(tmp_path / "qwen2"))
    with pytest.raises(ValueError, match=error) as e:
        resolve_model(cfg, None, tmp_path / "work")
    assert "tokenizer_config.json" in str(e.value)
