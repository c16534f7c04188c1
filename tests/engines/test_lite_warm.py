"""When the lite engine loads RapidOCR (Settings.lite_warm): a conversion on the first page that needs OCR (a
text-layer document never loads it), the long-lived services (API, MCP) when their workers start."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from ocrserve.api.app import create_app
from ocrserve.engines import create_engine
from ocrserve.engines.lite.rapid import _worker_init
from ocrserve.settings import Settings

PROFILE = "chandra-1"


def test_a_conversion_loads_rapidocr_when_a_page_needs_it_unless_told():
    assert create_engine("lite", PROFILE, Settings()).warm is False
    assert create_engine("lite", PROFILE, Settings(lite_warm=True)).warm is True
    assert create_engine("lite", PROFILE, Settings(), warm=True).warm is True  # an option over the setting
    _, init, (threads, warm) = create_engine("lite", PROFILE, Settings()).pool_workers()
    assert init is _worker_init and warm is False and threads >= 1  # its workers start without RapidOCR


def test_the_services_load_it_when_their_workers_start(tmp_path: Path):
    settings = Settings(data_dir=tmp_path / "data", api_keys="", engine="lite")
    with TestClient(create_app(settings)) as c:
        service = c.app.state.ctx.service
        assert service.engine.warm is True
    from ocrserve.mcp.documents import DocumentService

    assert DocumentService(Settings(), [tmp_path]).settings.lite_warm is True
    assert DocumentService(Settings(lite_warm=False), [tmp_path]).settings.lite_warm is False  # the user's word
