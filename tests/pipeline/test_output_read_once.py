"""Within one run an output folder's documents are read once (naming asks, then planning asks again),
and a document the run writes is read afresh."""

from ocrserve.pipeline import target as target_mod
from ocrserve.pipeline.target import OutputTarget
from tests.support import helpers


def test_each_output_is_read_once_per_run(tmp_path, monkeypatch):
    from ocrserve.pipeline.local import Converter

    src = tmp_path / "in"
    src.mkdir()
    helpers.text_pdf(src / "a.pdf", pages=1, title="A")
    out = tmp_path / "out"
    import asyncio

    asyncio.run(Converter(engine="lite", output_dir=out).run([str(src)]))  # the first run writes out/a
    reads: list[str] = []
    real = target_mod.load_existing
    monkeypatch.setattr(target_mod, "load_existing", lambda o, name: (reads.append(name), real(o, name))[1])
    summary = asyncio.run(Converter(engine="lite", output_dir=out).run([str(src)]))
    assert [r.status for r in summary.results] == ["skipped"]
    assert reads.count("a") == 1, reads

    t = OutputTarget(out)
    t.begin_run()
    first = t.load_existing("a")
    assert first is not None and t.load_existing("a") is first
    monkeypatch.setattr(target_mod, "write_document", lambda *a, **k: out / "a")
    t.write(None, "a", {}, "r1")  # a write forgets what was read under that name
    assert t.load_existing("a") is not first
