"""Table-driven tests: a function checked against a table of what it is given and what it answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def maps_as(fn: Callable[[Any], Any], table: dict) -> Callable[[Any, Any], None]:
    """A test, one case a row of `table` (given -> want), that `fn(given) == want`. Assign it to a
    test_ name: `test_normalize = maps_as(normalize, CASES)`."""

    @pytest.mark.parametrize(("given", "want"), list(table.items()))
    def test(given: Any, want: Any) -> None:
        assert fn(given) == want

    return test
