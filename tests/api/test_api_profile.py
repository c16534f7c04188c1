"""With no model chosen, the API speaks to its server as the model that server serves, as `convert` does."""

from __future__ import annotations

from fastapi.testclient import TestClient

from ocrserve.api.app import create_app
from ocrserve.settings import Settings
from tests.fakes.standin import StandIn
from tests.support.helpers import text_pdf


def test_the_api_follows_the_served_model_when_none_is_chosen(standin: StandIn, tmp_path):
    # the stand-in serves datalab-to/chandra (Chandra 1) and answers in its box format
    src = text_pdf(tmp_path / "memo.pdf", pages=1, title="Memo").read_bytes()
    settings = Settings(data_dir=tmp_path / "data", server=standin.url, model=None, api_keys="", fallback=False)
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/convert", params={"format": "json"}, files={"file": ("memo.pdf", src)})
        assert r.status_code == 200, r.text
        doc = r.json()
        (page,) = doc["pages"]
        assert page["status"] == "ok", page.get("error")
        assert doc["model"] == "chandra-1"  # the served model's profile: its prompt and its box format
    assert standin.stats()["total_requests"] >= 1
