"""With a server, the profile follows what it serves (its /v1/models card) when none is chosen, and a chosen
profile that is not the served model is one clear error before any page is sent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from ocrserve.engines import EngineError
from ocrserve.engines.openai import OpenAIEngine
from ocrserve.profiles import served_profile
from tests.support import helpers
from tests.support.capture import Capture


@pytest.mark.parametrize(
    "card,expected",
    [
        ({"id": "chandra", "root": "datalab-to/chandra-ocr-2"}, "chandra-2"),
        ({"id": "chandra", "root": "datalab-to/chandra"}, "chandra-1"),
        ({"id": "x", "root": "/models/chandra-ocr-2/"}, "chandra-2"),
        ({"id": "datalab-to/chandra"}, "chandra-1"),
        ({"id": "chandra"}, None),  # upstream's served name for both: no guess
        ({"id": "qwen", "root": "Qwen/Qwen3-VL-8B"}, None),
    ],
)
def test_the_served_model_names_its_profile(card, expected):
    prof = served_profile(card)
    assert (prof.name if prof else None) == expected


def test_a_local_checkpoint_folder_is_known_by_its_architecture(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5"}))
    assert served_profile({"id": "mine", "root": str(tmp_path)}).name == "chandra-2"


def _convert(pdf, out, server: str, *args: str) -> subprocess.CompletedProcess:
    """`ocrserve convert PDF -o OUT --server SERVER ARGS...` in a fresh process."""
    cmd = [sys.executable, "-m", "ocrserve", "convert", str(pdf), "-o", str(out), "--server", server, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _preflight(cap: Capture, model):
    eng = OpenAIEngine(model, server=cap.url)

    async def go():
        try:
            await eng.preflight()
        finally:
            await eng.aclose()
        return eng.profile

    return asyncio.run(go())


@pytest.mark.parametrize(
    "root,chosen,expected",
    [
        ("datalab-to/chandra", None, "chandra-1"),
        ("datalab-to/chandra-ocr-2", None, "chandra-2"),
        (None, None, "chandra-2"),  # an unknown model: the default
        (None, "chandra-1", "chandra-1"),
        ("datalab-to/chandra", "chandra-1", "chandra-1"),
    ],
)
def test_the_profile_follows_the_server_unless_chosen(root, chosen, expected):
    cap = Capture(root=root)
    try:
        assert _preflight(cap, chosen).name == expected
    finally:
        cap.close()


def test_a_chosen_profile_that_is_not_the_served_model_fails_before_any_page(tmp_path):
    cap = Capture(root="datalab-to/chandra")
    try:
        with pytest.raises(
            EngineError,
            match=r"serves datalab-to/chandra \(chandra-1\), but the model profile is "
            r"chandra-2: pass --model chandra-1",
        ):
            _preflight(cap, "chandra-2")
        pdf = helpers.text_pdf(tmp_path / "a.pdf", pages=2)
        r = _convert(pdf, tmp_path / "out", cap.url, "--model", "chandra-2", "-q")
        assert r.returncode != 0 and "pass --model chandra-1" in r.stderr
        assert cap.bodies == []  # no page was sent
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr
    finally:
        cap.close()


def test_convert_without_model_speaks_the_served_models_language(tmp_path):
    cap = Capture(root="datalab-to/chandra")
    try:
        pdf = helpers.text_pdf(tmp_path / "a.pdf", pages=1)
        r = _convert(pdf, tmp_path / "out", cap.url, "-q")
        assert r.returncode == 0, r.stderr
        (body,) = cap.bodies
        from ocrserve.profiles import load_profile

        assert body["messages"][0]["content"][1]["text"] == load_profile("chandra-1").prompt
        assert body["max_tokens"] == 8192
        data = json.loads((tmp_path / "out" / "a" / "a.json").read_text())
        assert data["pages"][0]["image_width"] == 1632  # Chandra 1's image: no 28-px grid
    finally:
        cap.close()


def test_max_retries_caps_the_retries_of_a_looping_page(tmp_path):
    from tests.support.capture import GOOD

    cap = Capture(GOOD + "<p>" + "and again " * 300, "length")
    try:
        pdf = helpers.text_pdf(tmp_path / "a.pdf", pages=1)
        r = _convert(pdf, tmp_path / "out", cap.url, "--max-retries", "2", "-q")
        assert r.returncode == 0, r.stderr
        assert [b["temperature"] for b in cap.bodies] == [0.0, 0.2, 0.4]
        page = json.loads((tmp_path / "out" / "a" / "a.json").read_text())["pages"][0]
        assert page["looped"] and page["attempts"] == 3 and page["blocks"][0]["text"] == "Hello world, a fine page."
    finally:
        cap.close()
