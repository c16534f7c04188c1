"""`--config FILE` (#31.3): a TOML file drives convert, serve and api below the environment and the flags
(flag > env > file > default); unknown keys and bad values are one line naming the file, exit 2;
`ocrserve config` prints the effective values and where each comes from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ocrserve.cli import app
from ocrserve.configfile import ENV
from tests.cli.support import cli

HEADER = "ACME Handbook running header"

CONFIG = """
max_pages = 12

[convert]
formats = ["md", "txt"]
pages = "1"
keep_headers_footers = true

[serve]
port = 9001
memory = "max"

[api]
port = 8181
data_dir = "{data}"
per_key_jobs = 7
"""


def _handbook(path: Path) -> Path:
    """Three pages, each with the same small running header on top."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    for i in range(3):
        c.setFont("Helvetica", 9)
        c.drawString(72, 760, HEADER)
        c.setFont("Helvetica-Bold", 20)
        c.drawString(72, 700, f"Chapter {i + 1} heading")
        c.setFont("Helvetica", 11)
        for j in range(10):
            c.drawString(72, 660 - 16 * j, f"Body line {j} of page {i + 1}: the quick brown fox jumps.")
        c.showPage()
    c.save()
    return path


@pytest.fixture
def setup(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    monkeypatch.setenv(ENV, "")  # the commands export the file they read; put it back afterwards
    for name in ("OCRSERVE_KEEP_HEADERS_FOOTERS", "OCRSERVE_MAX_PAGES", "OCRSERVE_PER_KEY_JOBS"):
        monkeypatch.delenv(name, raising=False)
    conf = tmp_path / "ocrserve.toml"
    conf.write_text(CONFIG.format(data=tmp_path / "data"), encoding="utf-8")
    return _handbook(tmp_path / "doc.pdf"), conf


def _convert(pdf: Path, out: Path, *args: str) -> Path:
    r = cli("convert", str(pdf), "-o", str(out), "-q", *args)
    assert r.returncode == 0, r.stderr
    return out / "doc"


def test_a_config_file_drives_a_convert_run(setup, tmp_path: Path):
    pdf, conf = setup
    folder = _convert(pdf, tmp_path / "out", "--config", str(conf))
    assert sorted(p.name for p in folder.iterdir()) == ["doc.json", "doc.md", "doc.txt"]  # formats (json always)
    md = (folder / "doc.md").read_text(encoding="utf-8")
    assert "Chapter 1" in md and "Chapter 2" not in md, md  # pages = "1"
    assert HEADER in md  # keep_headers_footers = true
    plain = (_convert(pdf, tmp_path / "plain", "--pages", "1") / "doc.md").read_text(encoding="utf-8")
    assert HEADER not in plain  # without the file: the defaults


def test_the_file_names_through_ocrserve_config_env(setup, tmp_path: Path, monkeypatch):
    pdf, conf = setup
    monkeypatch.setenv(ENV, str(conf))
    assert (_convert(pdf, tmp_path / "out") / "doc.txt").exists()


def test_env_beats_the_file_and_a_flag_beats_both(setup, tmp_path: Path, monkeypatch):
    pdf, conf = setup
    monkeypatch.setenv("OCRSERVE_KEEP_HEADERS_FOOTERS", "false")
    md = (_convert(pdf, tmp_path / "env", "--config", str(conf)) / "doc.md").read_text(encoding="utf-8")
    assert HEADER not in md
    folder = _convert(pdf, tmp_path / "flag", "--config", str(conf), "--keep-headers-footers", "--pages", "2")
    md = (folder / "doc.md").read_text(encoding="utf-8")
    assert HEADER in md and "Chapter 2" in md and "Chapter 1" not in md


def test_a_flag_turns_off_what_the_file_turns_on(setup, tmp_path: Path):
    """A boolean the file sets true, undone on the command line by the flag pair's other half
    (`--no-keep-headers-footers`); before, a bool option had only the flag that sets it."""
    pdf, conf = setup
    md = (_convert(pdf, tmp_path / "off", "--config", str(conf), "--no-keep-headers-footers") / "doc.md").read_text(
        encoding="utf-8"
    )
    assert HEADER not in md and "Chapter 1" in md


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("[convert]\nformatz = 1\n", "unknown key 'formatz' in [convert] (known: "),
        ("bogus = 1\n", "unknown key 'bogus' at the top level"),
        ('[convert]\npages = "x-"\n', "[convert] --pages 'x-'"),
        ("[convert]\nconcurrency = 0\n", "[convert] option 'concurrency'"),
        ('max_pages = "many"\n', "max_pages: Input should be a valid integer"),
        ("[convert\n", "not valid TOML"),
    ],
)
def test_unknown_keys_and_bad_values_are_one_line(setup, tmp_path: Path, text: str, wanted: str):
    pdf, _ = setup
    conf = tmp_path / "bad.toml"
    conf.write_text(text, encoding="utf-8")
    r = cli("convert", str(pdf), "-o", str(tmp_path / "out"), "--config", str(conf))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"error: {conf}") and wanted in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_file_is_one_line(setup, tmp_path: Path):
    r = cli("config", "--config", str(tmp_path / "nope.toml"))
    assert r.returncode == 2 and r.stderr == f"error: {tmp_path / 'nope.toml'}: config file not found\n"


def test_ocrserve_config_prints_the_effective_values_and_their_sources(setup, monkeypatch):
    _, conf = setup
    monkeypatch.setenv("OCRSERVE_PER_KEY_JOBS", "9")
    r = cli("config", "--config", str(conf))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"# config file: {conf}"
    for line in [
        "max_pages = 12  # file",
        "max_image_pixels = 200000000  # default",
        'pages = "1"  # file [convert]',
        "keep_headers_footers = true  # file [convert]",
        "paginate = false  # default",
        "port = 9001  # file [serve]",
        'memory = "max"  # file [serve]',
        "port = 8181  # file [api]",
        "per_key_jobs = 9  # env OCRSERVE_PER_KEY_JOBS",  # env beats [api]
    ]:
        assert line in lines, (line, r.stdout)


def test_serve_reads_its_table(setup):
    _, conf = setup
    r = CliRunner().invoke(
        app, ["serve", "--dry-run", "--vllm-bin", "vllm", "--gpu-memory-gib", "80", "--config", str(conf)]
    )
    assert r.exit_code == 0, r.output
    assert "memory plan (max" in r.stdout and "--port 9001 " in r.stdout and "http://127.0.0.1:9001/v1" in r.stdout
    args = ["serve", "--dry-run", "--vllm-bin", "vllm", "--gpu-memory-gib", "80", "--config", str(conf)]
    r = CliRunner().invoke(app, [*args, "--port", "9100"])
    assert r.exit_code == 0 and "--port 9100 " in r.stdout, r.output  # the flag wins


def test_api_reads_its_table(setup, monkeypatch, tmp_path: Path):
    import ocrserve.api

    _, conf = setup
    seen: dict = {}
    monkeypatch.setattr(ocrserve.api, "run_api", lambda settings, host, port: seen.update(s=settings, port=port))
    r = CliRunner().invoke(app, ["api", "--config", str(conf)])
    assert r.exit_code == 0, r.output
    s = seen["s"]
    assert seen["port"] == 8181 and s.data_dir == tmp_path / "data" and s.per_key_jobs == 7 and s.max_pages == 12
    monkeypatch.setenv("OCRSERVE_DATA_DIR", str(tmp_path / "env"))
    r = CliRunner().invoke(app, ["api", "--config", str(conf), "--port", "8282"])
    assert r.exit_code == 0, r.output
    assert seen["port"] == 8282 and seen["s"].data_dir == tmp_path / "env"  # flag > file; env > file
