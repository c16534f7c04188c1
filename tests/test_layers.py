"""The package's shape: every import runs from a higher layer down (or within a layer), never up,
and no module grows past 400 lines. Layers, lowest first (docs/architecture.md draws them)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "ocrserve"

LAYERS: list[set[str]] = [
    {
        "settings",
        "profiles",
        "labels",
        "sanitize",
        "document",
        "schemas",
        "prompts",
        "samples",
        "png",
        "imagesize",
        "errors",
        "configfile",
    },
    {"render"},  # Document -> Markdown/HTML; also the block renderer parse uses
    {"parse", "ingest"},  # raw model HTML -> blocks; inputs -> page images
    {"engines"},  # pages -> raw model HTML
    {"pipeline", "export"},  # schedules ingest -> engines -> parse -> render -> files; the searchable PDF
    {"api", "vllm", "bench", "eval", "mcp"},
    {"cli", "__init__", "__main__"},
]


def layer_of(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else "__init__"
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module}: its top-level part {top!r} is in no layer (add it to LAYERS)")


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1] if len(parts) > 2 else [parts[0], "__init__"]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("ocrserve"):
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("ocrserve")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def test_no_import_runs_up_a_layer_and_no_relative_imports():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        me = module_name(path)
        for line, target in imports(path):
            if target.startswith("."):
                bad.append(f"{path.relative_to(PKG.parent)}:{line}: relative import {target}")
            elif target != "ocrserve" and layer_of(target) > layer_of(me):
                bad.append(
                    f"{path.relative_to(PKG.parent)}:{line}: {me} (layer {layer_of(me)}) imports "
                    f"{target} (layer {layer_of(target)})"
                )
    assert not bad, "\n".join(bad)


def test_the_checker_sees_an_upward_import(tmp_path):
    # a lower layer importing a higher one is caught (the test above can fail)
    assert layer_of("ocrserve.parse.blocks") < layer_of("ocrserve.pipeline.local")
    assert layer_of("ocrserve.render.markdown") < layer_of("ocrserve.parse.blocks")


def test_no_module_over_400_lines():
    long = {
        str(p.relative_to(PKG.parent)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert not long, long


def test_no_python_file_over_400_lines_in_the_package_bench_or_tests():
    # issue #27: "no file over 400 lines", the bench scripts and the tests too
    root = PKG.parent
    long = {
        str(p.relative_to(root)): n
        for folder in ("ocrserve", "bench", "tests")
        for p in (root / folder).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert not long, long
