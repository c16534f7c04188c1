"""A configs-only model folder completed with another model's tokenizer, speaking its own special ids.

bench/models/chandra2-shape (Chandra 2: Qwen3.5) carries Chandra 2's configs but no tokenizer.json;
the serving sweep borrows chandra1-shape's Qwen2 one (sweep.resolve_model) and renumbers it here.
"""

from __future__ import annotations

import json
from pathlib import Path

_TOKEN_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def _filler_tokens(vocab: dict[str, int], n: int):
    """`n` four-letter strings that are not in `vocab`: as vocabulary entries no merge builds them (every
    merge's result is an entry), so text never encodes to them, and one decodes to four letters, about
    what a real token of that range decodes to (a dummy-weight model samples them)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    made = 0
    for i in range(len(letters) ** 4):
        if made == n:
            return
        word = "".join(letters[(i // 26**k) % 26] for k in (3, 2, 1, 0))
        if word not in vocab:
            made += 1
            yield word
    raise ValueError(f"no room for {n} filler tokens")


def renumber_added_tokens(folder: Path) -> int:
    """Give a borrowed tokenizer.json's special tokens the ids the folder's own tokenizer_config.json names.

    A configs-only shape folder (Chandra 2: Qwen3.5, `<|image_pad|>` 248056) borrows another model's BPE
    vocabulary (Qwen2's: 151,643 entries); its config.json names its own special ids, so the tokenizer must
    produce those. The tokenizers library numbers added tokens from the end of the BPE vocabulary on, in the
    order listed, whatever ids the file states; so the vocabulary is filled up to the first named id with
    entries no merge produces (_filler_tokens), and the added tokens are listed in the order of their new
    ids, with the flags the folder's config gives them. Tokens are matched by content; the BPE ids stay.
    Returns how many added tokens changed id (0: the borrowed tokenizer already has the named ids).
    """
    cfg_path, tok_path = folder / "tokenizer_config.json", folder / "tokenizer.json"
    if not cfg_path.is_file() or not tok_path.is_file():
        return 0
    decoder = json.loads(cfg_path.read_text()).get("added_tokens_decoder") or {}
    named = {entry["content"]: (int(token_id), entry) for token_id, entry in decoder.items()}
    wanted = {content: token_id for content, (token_id, _) in named.items()}
    if not wanted:
        return 0
    if len(wanted) != len(decoder):
        raise ValueError(f"{cfg_path}: a token is named twice in added_tokens_decoder")
    tok = json.loads(tok_path.read_text())
    borrowed = {a["content"]: a for a in tok.get("added_tokens", [])}
    vocab = tok.get("model", {}).get("vocab")

    def current_id(content: str) -> int | None:
        if content in borrowed:
            return borrowed[content]["id"]
        return vocab.get(content) if isinstance(vocab, dict) else None

    if all(current_id(content) == token_id for content, token_id in wanted.items()):
        return 0  # the borrowed tokenizer speaks these ids already
    if not isinstance(vocab, dict):
        raise ValueError(f"{tok_path}: only a BPE tokenizer.json can be renumbered")
    in_vocab = sorted(c for c in wanted if c in vocab)
    if in_vocab:
        raise ValueError(
            f"{cfg_path}: {in_vocab[:3]} are words of the borrowed vocabulary in {tok_path}, not added tokens"
        )
    base, ids = min(wanted.values()), sorted(wanted.values())
    if ids != list(range(base, base + len(ids))):
        raise ValueError(
            f"{cfg_path}: the special token ids must be one contiguous run, got {ids[0]}..{ids[-1]} with gaps"
        )
    start = max(vocab.values(), default=-1) + 1
    if start != len(vocab):
        raise ValueError(f"{tok_path}: the vocabulary's ids are not 0..{len(vocab) - 1}")
    if base < start:
        raise ValueError(
            f"{cfg_path}: special token id {base} is inside the borrowed vocabulary of {start} in {tok_path}"
        )
    for i, word in enumerate(_filler_tokens(vocab, base - start), start):
        vocab[word] = i
    changed, added = 0, []
    for content, token_id in sorted(wanted.items(), key=lambda kv: kv[1]):
        entry = borrowed.pop(content, None) or {
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        flags = {k: named[content][1][k] for k in _TOKEN_FLAGS if k in named[content][1]}
        changed += entry.get("id") != token_id
        added.append({**entry, **flags, "id": token_id})
    for entry in borrowed.values():  # the borrowed tokenizer's others follow
        added.append({**entry, "id": base + len(added)})
        changed += 1
    tok["added_tokens"] = added
    tok_path.write_text(json.dumps(tok, ensure_ascii=False))
    return changed
