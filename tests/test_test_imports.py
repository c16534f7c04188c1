"""The tests' own shape (issue #27): no test module imports another test module. What several test modules
share (documents they build, page inputs, checks, constants) lives in tests/support, so a test module can
be moved, renamed or run alone without breaking another."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _is_test_module(parts: list[str], root: Path) -> bool:
    return parts[-1].startswith("test_") and root.joinpath(*parts).with_suffix(".py").is_file()


def imported_test_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """The test modules (`tests.<...>.test_*`, also as `from tests.<pkg> import test_*`) `path` imports."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module.split(".")
            candidates = [base] if _is_test_module(base, root) else [base + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name.split(".") for a in node.names]
        else:
            continue
        out += [(node.lineno, ".".join(c)) for c in candidates if c[0] == "tests" and _is_test_module(c, root)]
    return out


def test_no_test_module_imports_another():
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {target} (move what it shares into tests/support)"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line, target in imported_test_modules(path)
    ]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_test_module_import(tmp_path):
    pkg = tmp_path / "tests" / "engines"
    pkg.mkdir(parents=True)
    (pkg / "test_a.py").write_text("X = 1\n")
    (pkg / "helpers.py").write_text("test_like = 1\n")
    user = tmp_path / "tests" / "test_b.py"
    user.write_text(
        "from tests.engines.test_a import X\n"
        "from tests.engines import test_a\n"
        "import tests.engines.test_a\n"
        "from tests.engines.helpers import test_like\n"  # a name that looks like a test module, in a helper: fine
        "import os\n"
    )
    assert imported_test_modules(user, tmp_path) == [
        (1, "tests.engines.test_a"),
        (2, "tests.engines.test_a"),
        (3, "tests.engines.test_a"),
    ]
