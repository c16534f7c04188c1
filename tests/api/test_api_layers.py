"""The API's layers: only the HTTP layer (app.py, routes/, deps.py, the package facade) knows the web framework; the domain
(service, jobs, worker, tap, ...) raises its own errors; no module is over 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[2] / "ocrserve" / "api"
HTTP_LAYER = {"app.py", "deps.py", "__init__.py"}  # __init__: the facade (create_app, run_api)


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("path", sorted(API.rglob("*.py")), ids=lambda p: str(p.relative_to(API)))
def test_no_web_framework_below_the_http_layer_and_small_modules(path: Path) -> None:
    in_http = path.name in HTTP_LAYER and path.parent == API or path.parent.name == "routes"
    if not in_http:
        assert not _imports(path) & {"fastapi", "starlette"}, f"{path.name} imports the web framework"
    assert len(path.read_text(encoding="utf-8").splitlines()) < 400, path.name
