"""`ocrserve bench` on the CPU against the stand-in server: the three clients side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ocrserve.bench.runner import pct, run_bench, write_report
from ocrserve.bench.synthetic import make_pdf

ROOT = Path(__file__).resolve().parents[2]


def test_synthetic_pages_are_distinct(tmp_path):
    import pypdfium2 as pdfium

    pdf = make_pdf(tmp_path / "s.pdf", 4, born_digital=False)
    doc = pdfium.PdfDocument(str(pdf))
    images = [doc[i].render(scale=0.5).to_pil().tobytes() for i in range(4)]
    sizes = {tuple(doc[i].get_size()) for i in range(4)}
    doc.close()
    assert len(set(images)) == 4 and len(sizes) >= 3  # distinct pages, several page sizes


def test_three_modes_side_by_side(tmp_path, standin):
    standin.control(delay_s=0.02)
    partial: list[list[str]] = []
    report = run_bench(
        server=standin.url,
        synthetic=8,
        modes=["pipeline", "plain", "ceiling"],
        concurrency=4,
        plain_batch=3,
        max_tokens=32,
        ignore_eos=True,
        stream_probe=2,
        on_partial=lambda r: partial.append(list(r["modes"])),
    )
    assert partial == [["pipeline"], ["pipeline", "plain"], ["pipeline", "plain", "ceiling"]]
    assert report["model_profile"] == "chandra-1"  # no --model: the profile of what the stand-in serves
    for mode in ("pipeline", "plain", "ceiling"):
        r = report["modes"][mode]
        assert r["pages"] == 8 and r["failed"] == 0, (mode, r)
        assert r["pages_per_s"] > 0 and r["latency_p50_s"] is not None
        assert r["completion_tokens"] == 8 * 32  # ignore_eos: exactly max_tokens each
        assert r["prompt_tokens"] > 8 * 400
        assert r["client_cpu_s_per_page"] is not None
    # the stand-in saw every page of every mode, plus the streamed probe
    assert standin.stats()["total_requests"] == 3 * 8 + 2
    assert set(report["ratios"]) == {"pipeline_vs_plain", "pipeline_vs_ceiling"}
    s = report["streaming_idle"]
    assert len(s["ttft_s"]) == 2 and s["ttft_median_s"] >= 0.02
    jp, mp = write_report(report, tmp_path, "t")
    assert json.loads(jp.read_text())["modes"]["plain"]["pages"] == 8
    md = mp.read_text()
    assert "| pipeline | 8 | 0 |" in md and "| ceiling | 8 | 0 |" in md and "Ratios" in md


def test_percentiles():
    assert pct([], 50) is None
    assert pct([3.0, 1.0, 2.0], 50) == 2.0
    assert pct(list(map(float, range(101))), 99) == 99.0


def test_a_profile_the_server_does_not_serve_is_refused_before_any_page(standin):
    with pytest.raises(ValueError, match="serves datalab-to/chandra .chandra-1., but the model profile is chandra-2"):
        run_bench(server=standin.url, synthetic=1, modes=["ceiling"], model="chandra-2", stream_probe=0)
    assert standin.stats()["total_requests"] == 0


def test_cli_needs_a_corpus(standin):
    r = subprocess.run(
        [sys.executable, "-m", "ocrserve", "bench", "--server", standin.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--synthetic" in r.stderr


SCRIPTS = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))


def test_the_bench_scripts_are_found():
    # the --help test below takes every bench/*.py (a new one joins by itself; bench/_*.py are their parts)
    assert {"client_cpu_stages", "client_throughput", "hf_gpu", "lite_olmocr", "png_render_micro"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_bench_script_answers_help(script):
    """`python -m bench.NAME --help` from the repository root, without PYTHONPATH: the scripts import the
    repository's package (and the stand-in) as a package, no sys.path edits."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("usage: ") and "--help" in r.stdout


def test_bench_scripts_do_not_edit_sys_path_and_stay_short():
    for p in sorted((ROOT / "bench").glob("*.py")):
        text = p.read_text(encoding="utf-8")
        assert "sys.path" not in text, p.name
        assert len(text.splitlines()) <= 400, p.name


def test_hf_gpu_pages_are_distinct_and_seeded():
    from bench._hf_gpu import page_image, seed_of

    a, b = page_image(seed_of(8, 0), 320, 400), page_image(seed_of(8, 1), 320, 400)
    assert a.size == (320, 400) and a.mode == "RGB"
    assert a.tobytes() != b.tobytes() and a.tobytes() == page_image(seed_of(8, 0), 320, 400).tobytes()


def test_stages_mode_reports_client_cpu_per_stage(tmp_path, standin):
    report = run_bench(server=standin.url, synthetic=5, modes=["stages"], max_tokens=16, stream_probe=0)
    st = report["client_cpu_stages"]
    assert st["pages"] == 5 and list(st["stages"]) == ["render", "encode", "request", "parse", "figures", "outputs"]
    assert all(v["mean_ms"] > 0 for v in st["stages"].values())
    assert st["total_mean_ms"] == pytest.approx(sum(v["mean_ms"] for v in st["stages"].values()), abs=0.05)
    assert standin.stats()["completed"] == 5  # each page really went to the server
    _, mp = write_report(report, tmp_path, "stages")
    assert "Client CPU per page by stage" in mp.read_text()


def test_client_cpu_leaves_out_a_server_the_bench_started():
    """A child marked as a server (the stand-in, vLLM) is not the client: its CPU is not counted, while it
    runs nor once it is reaped (reap_uncounted), where a reaped child's CPU joins this process's own."""
    import subprocess
    import sys
    import time

    import psutil

    from ocrserve.bench import sampling

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\nimport sys; sys.stdin.read()"

    def measured(exclude: bool) -> tuple[float, float]:
        child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE)
        try:
            if exclude:
                sampling.exclude_from_client(child.pid)
            c0 = sampling.client_cpu_s()
            p = psutil.Process(child.pid)
            while sum(p.cpu_times()[:2]) < 1.0:
                time.sleep(0.01)  # until the child has burnt its second; sleeping, this wait adds next to no CPU
            live = sampling.client_cpu_s() - c0
            child.stdin.close()
            if exclude:
                sampling.reap_uncounted(child, timeout=30)
            else:
                child.wait(timeout=30)
            return live, sampling.client_cpu_s() - c0
        finally:
            sampling._NOT_CLIENT.discard(child.pid)

    with_live, with_reaped = measured(False)
    without_live, without_reaped = measured(True)
    assert with_live - without_live > 0.5, (with_live, without_live)
    assert with_reaped - without_reaped > 0.5, (with_reaped, without_reaped)


def test_the_measuring_tools_own_children_are_not_client_cpu(tmp_path):
    """nvidia-smi run by the samplers is reaped with its CPU time, which is then left out of client CPU."""
    import sys

    from ocrserve.bench import sampling

    tool = tmp_path / "tool.py"
    tool.write_text(
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.8:\n    pass\nprint('42')\n"
    )
    c0, u0 = sampling.client_cpu_s(), sampling._UNCOUNTED_S[0]
    assert sampling.run_uncounted([sys.executable, str(tool)]).strip() == "42"
    assert sampling._UNCOUNTED_S[0] - u0 >= 0.8
    assert sampling.client_cpu_s() - c0 < 0.5  # the tool's 0.8 s is not the client's
    # a tool that hangs is killed at the timeout (TimeoutExpired, reaped); one that dies by a signal is not a timeout
    with pytest.raises(subprocess.TimeoutExpired):
        sampling.run_uncounted(
            [sys.executable, "-c", "import time; print('x', flush=True); time.sleep(60)"], timeout=0.5
        )
    assert (
        sampling.run_uncounted(
            [sys.executable, "-c", "import os, signal; print('y', flush=True); os.kill(os.getpid(), signal.SIGKILL)"],
            timeout=30,
        ).strip()
        == "y"
    )


def test_the_samplers_own_cpu_is_not_client_cpu(monkeypatch):
    """The sampler thread's work (PSS of every client process, /metrics) is the measuring's: a pipeline
    waiting on a slow GPU server was charged ~20% of a core for it (client CPU grew with the run's length)."""
    import time

    from ocrserve.bench import sampling

    def costly_rss() -> float:  # stands in for smaps_rollup of many processes
        t = time.thread_time()
        while time.thread_time() - t < 0.05:
            pass
        return 1.0

    monkeypatch.setattr(sampling, "client_rss_mib", costly_rss)
    c0, u0 = sampling.client_cpu_s(), sampling._UNCOUNTED_S[0]
    with sampling.Sampler(None, interval=0.001) as s:
        time.sleep(1.0)
    spent = sampling._UNCOUNTED_S[0] - u0
    assert len(s.rss_mib) >= 5 and spent >= 0.25, (len(s.rss_mib), spent)
    assert sampling.client_cpu_s() - c0 < spent / 2, (sampling.client_cpu_s() - c0, spent)
