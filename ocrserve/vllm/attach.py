"""Is the server already answering on a port the one `ocrserve serve` would start there? Its
/v1/models card against the `vllm serve` command line: the served name (`id`), the checkpoint
(`root`: the same, or one of the same built-in profile) and `max_model_len`."""

from __future__ import annotations

import httpx

from ocrserve.vllm.launch import ProcessSpec


def _flag(argv: list[str], flag: str) -> str | None:
    """The value of the last `flag` in argv (vLLM keeps the last occurrence), or None."""
    value = None
    for i, a in enumerate(argv[:-1]):
        if a == flag:
            value = argv[i + 1]
    return value


def expected_card(spec: ProcessSpec) -> dict | None:
    """What the `vllm serve` of this spec lists in /v1/models (id, root, max_model_len: None when its
    command line does not say), or None when the spec is no `vllm serve`."""
    if "serve" not in spec.argv[:-1]:
        return None
    model = spec.argv[spec.argv.index("serve") + 1]
    mml = _flag(spec.argv, "--max-model-len")
    return {
        "id": _flag(spec.argv, "--served-model-name") or model,
        "root": model,
        "max_model_len": int(mml) if mml and mml.isdigit() else None,
    }


def _same_model(root: str, want: str) -> bool:
    if root == want:
        return True
    from ocrserve.profiles import served_profile

    a, b = served_profile({"root": root}), served_profile({"root": want})
    return a is not None and a is b


def attach_mismatch(url: str, want: dict, timeout: float = 5.0) -> str | None:
    """Why the healthy server at url is not the one `want` describes (expected_card), or None when it is."""
    try:
        with httpx.Client(timeout=timeout) as c:
            cards = c.get(f"{url}/v1/models").json().get("data") or []
    except (httpx.HTTPError, ValueError, AttributeError) as e:
        return f"its /v1/models cannot be read ({type(e).__name__})"
    cards = [c for c in cards if isinstance(c, dict)]
    card = next((c for c in cards if c.get("id") == want["id"]), None)
    if card is None:
        return f"it serves {', '.join(str(c.get('id')) for c in cards) or 'no model'}, not {want['id']}"
    root, mml = str(card.get("root") or ""), card.get("max_model_len")
    if not _same_model(root, want["root"]):
        return f"it serves {want['id']} as {root or 'an unnamed model'}, not {want['root']}"
    if want["max_model_len"] is not None and mml != want["max_model_len"]:
        return f"it serves {want['id']} with max_model_len {mml}, not {want['max_model_len']}"
    return None
