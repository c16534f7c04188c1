"""The app's context: the service and the job worker, set by the app's lifespan, are an error to read before."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocrserve.api.deps import Context


def _context() -> Context:
    return Context(settings=None, auth=None, store=None, metrics=None, limiter=None, uploads=Path("."))  # type: ignore[arg-type]


@pytest.mark.parametrize("part, named", [("service", "service"), ("worker", "job worker")])
def test_a_part_the_lifespan_sets_is_an_error_to_read_before(part, named):
    ctx = _context()
    with pytest.raises(RuntimeError, match=f"^the API's {named} is not started \\(the app's lifespan sets it\\)$"):
        getattr(ctx, part)
    setattr(ctx, part, "set")
    assert getattr(ctx, part) == "set"
    other = _context()  # each context its own
    with pytest.raises(RuntimeError):
        getattr(other, part)
