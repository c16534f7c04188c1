"""The serving sweep's plumbing on the CPU: specs, planned commands (dry run), and a real run of two
configurations through `ocrserve serve` against the stand-in server in place of vLLM."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ocrserve.bench.load import metrics_delta, parse_metrics
from ocrserve.bench.sweep import parse_plan, serve_argv
from ocrserve.bench.sweep_spec import SweepConfig, load_spec, scaling_configs, sweep_spec

ROOT = Path(__file__).resolve().parents[2]
STANDIN_VLLM = f"{sys.executable} -m tests.fakes.standin_vllm"


def _spec(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(data))
    return p


def _run_spec(tmp_path: Path, configs: list[dict], pages: int, defaults: dict, max_tokens: int = 16, **more) -> Path:
    """A spec for a run against the stand-in: `pages` pages of `max_tokens` output tokens, the configs' defaults."""
    return _spec(tmp_path, {"pages": pages, "max_tokens": max_tokens, "defaults": defaults, "configs": configs, **more})


def test_spec_defaults_merge_and_bad_specs_are_named(tmp_path):
    spec = load_spec(
        _spec(
            tmp_path,
            {"pages": 4, "defaults": {"concurrency": 64}, "configs": [{"name": "a"}, {"name": "b", "concurrency": 8}]},
        )
    )
    assert [c.concurrency for c in spec.configs] == [64, 8]
    with pytest.raises(ValueError, match="names repeat"):
        load_spec(_spec(tmp_path, {"configs": [{"name": "a"}, {"name": "a"}]}))
    with pytest.raises(ValueError, match="configs"):
        load_spec(_spec(tmp_path, {"configs": []}))
    with pytest.raises(ValueError, match="spec.json"):
        load_spec(tmp_path / "spec.json.missing")
    with pytest.raises(ValueError):  # unknown key: a typo fails loudly
        load_spec(_spec(tmp_path, {"configs": [{"name": "a", "concurency": 3}]}))


def test_serve_argv_passes_vllm_flags_after_the_separator():
    cfg = SweepConfig(name="x", max_num_batched_tokens=32768, vllm_args=["--renderer-num-workers", "8"])
    argv = serve_argv(cfg, "chandra-1", 8100, dry_run=True, extra_vllm=["--gpu-memory-utilization", "0.45"])
    i = argv.index("--")
    assert argv[i + 1 :] == ["--renderer-num-workers", "8", "--gpu-memory-utilization", "0.45"]
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "32768" and "--dry-run" in argv[:i]
    assert "--mm-cache-gb" in argv and "--no-prefix-caching" in argv and "--load-format" in argv


def test_scaling_configs_cover_replicas_and_the_encoder_decoder_split():
    names = [(c.name, c.gpus, c.parallel) for c in scaling_configs(4)]
    assert names == [
        ("dp-1", "0", "dp"),
        ("dp-2", "0,1", "dp"),
        ("dp-4", "0,1,2,3", "dp"),
        ("epd-1e3d", "0,1,2,3", "epd"),
    ]
    epd = scaling_configs(4)[-1]
    assert epd.epd_encoders == 1 and epd.client_concurrency == 128 * 3
    assert [c.name for c in scaling_configs(1)] == ["dp-1"]


def test_metrics_delta_gives_stage_means_and_counters():
    before = parse_metrics(
        'vllm:request_prefill_time_seconds_sum{model_name="c"} 2.0\n'
        'vllm:request_prefill_time_seconds_count{model_name="c"} 4\n'
        'vllm:num_preemptions_total{engine="0"} 1\n'
    )
    after = parse_metrics(
        'vllm:request_prefill_time_seconds_sum{model_name="c"} 12.0\n'
        'vllm:request_prefill_time_seconds_count{model_name="c"} 9\n'
        'vllm:num_preemptions_total{engine="0"} 3\n# HELP x\n'
    )
    d = metrics_delta(before, after)
    assert d["prefill_s"] == 2.0 and d["preemptions"] == 2 and d["decode_s"] is None


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ocrserve", "bench", "sweep", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        **kw,
    )


def _sweep_standin(spec: Path, tmp_path: Path, port: int, *extra: str) -> subprocess.CompletedProcess:
    """A sweep that serves and measures the spec's configs on the stand-in vLLM: results in tmp_path/out."""
    return _run(
        ["--spec", str(spec), "--model", "chandra-1", "--gpu-memory-gib", "140", "--vllm-bin", STANDIN_VLLM]
        + ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--port", str(port)]
        + ["--startup-timeout", "60", *extra]
    )


def test_dry_run_plans_scaling_on_four_gpus(tmp_path):
    out = tmp_path / "out"
    p = _run(
        [
            "--scaling",
            "4",
            "--dry-run",
            "--gpu-memory-gib",
            "140",
            "--model",
            "chandra-1",
            "--out",
            str(out),
            "--name",
            "scale",
        ]
    )
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads((out / "scale.json").read_text())
    plans = {k: v["plan"] for k, v in rep["results"].items()}
    vllm = {k: [c for c in plans[k]["commands"] if " vllm serve " in f" {c}"] for k in ("dp-1", "dp-2", "dp-4")}
    assert [len(v) for v in vllm.values()] == [1, 2, 4]
    # several GPUs: one endpoint, the router in front of the replicas (one GPU: the replica itself)
    assert [sum("ocrserve.vllm.router" in c for c in plans[k]["commands"]) for k in vllm] == [0, 1, 1]
    assert [len(plans[k]["endpoints"]) for k in vllm] == [1, 1, 1]
    epd = plans["epd-1e3d"]["commands"]
    assert sum("--mm-encoder-only" in c for c in epd) == 1 and sum("ec_consumer" in c for c in epd) == 3
    assert "CUDA_VISIBLE_DEVICES=3" in " ".join(plans["dp-4"]["commands"])
    assert "| dp-2 |" in (out / "scale.md").read_text()


def test_sweep_options_pick_configs_and_override_the_load(tmp_path):
    spec = _spec(tmp_path, {"pages": 8, "configs": [{"name": "a"}, {"name": "b", "memory": "max"}, {"name": "c"}]})
    s = sweep_spec(spec, only="c,a", pages=4)
    assert [c.name for c in s.configs] == ["a", "c"] and s.pages == 4 and s.max_tokens == 1024  # the spec's order
    s = sweep_spec(spec, scaling=2, max_tokens=64)  # scaling on the spec's first config
    assert [c.name for c in s.configs] == ["dp-1", "dp-2", "epd-1e1d"] and s.max_tokens == 64 and s.pages == 8
    assert [c.name for c in sweep_spec(None, scaling=1).configs] == ["dp-1"]
    with pytest.raises(ValueError, match="give --spec or --scaling"):
        sweep_spec(None)
    with pytest.raises(ValueError, match=r"--only names configs the spec lacks: \['z'\]"):
        sweep_spec(spec, only="a,z")


def test_sweep_is_an_ocrserve_bench_subcommand(tmp_path):
    p = _run(["--spec", str(_spec(tmp_path, {"configs": [{"name": "a"}]})), "--only", "z", "--out", str(tmp_path)])
    assert p.returncode == 2 and "--only names configs the spec lacks" in p.stderr
    p = _run([])
    assert p.returncode == 2 and "give --spec or --scaling" in p.stderr
    out = tmp_path / "out"
    p = _run(["--scaling", "1", "--dry-run", "--gpu-memory-gib", "140", "--model", "chandra-1", "--out", str(out)])
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads((out / "sweep.json").read_text())
    assert (
        rep["command"]
        == f"ocrserve bench sweep --scaling 1 --dry-run --gpu-memory-gib 140 --model chandra-1 --out {out}"
    )
    assert "[dp-1] " in p.stdout and f"written: {out / 'sweep.json'}" in p.stdout


def test_parse_plan_reads_what_serve_prints():
    text = (
        "memory plan (lean, fp8) on a 140.4 GiB GPU:\n  total                57.7 GiB  = 41% of the GPU\n"
        "commands:\n  [replica-0] CUDA_VISIBLE_DEVICES=0 vllm serve m --port 8100\n"
        "endpoints: http://127.0.0.1:8100/v1 http://127.0.0.1:8101/v1\n"
    )
    p = parse_plan(text)
    assert p["planned_gib"] == 57.7 and p["gpu_gib"] == 140.4
    assert p["commands"] == ["CUDA_VISIBLE_DEVICES=0 vllm serve m --port 8100"] and len(p["endpoints"]) == 2


def test_sweep_runs_each_config_through_ocrserve_serve(tmp_path):
    """Two configurations, servers started by `ocrserve serve` with a stand-in vLLM, one load each, one table."""
    configs = [
        {"name": "base", "prefill_probe": True, "serve_args": ["--renderer-workers", "0"]},
        {"name": "renderer", "pages": 4, "vllm_args": ["--renderer-num-workers", "8"], "env": {"OMP_NUM_THREADS": "7"}},
        {"name": "broken", "profile": "no-such-profile"},
    ]
    spec = _run_spec(tmp_path, configs, pages=6, defaults={"concurrency": 3}, prefill_pages=3)
    out = tmp_path / "out"
    p = _sweep_standin(spec, tmp_path, 18431, "--overlap", "2")
    rep = json.loads((out / "sweep.json").read_text())
    res = rep["results"]
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]  # the broken config fails the run, not the sweep
    assert "no-such-profile" in res["broken"]["plan"]["error"]
    for name, pages in (("base", 6), ("renderer", 4)):  # a config's own `pages` overrides the spec's
        r = res[name]
        assert r["ok"], (name, r.get("error"), r.get("log_tail", "")[-1500:])
        assert r["load"]["pages"] == pages and r["load"]["failed"] == 0
        assert r["load"]["completion_tokens"] == pages * 16  # fixed output length
        assert r["load"]["pages_per_s"] > 0 and r["serve_exit_code"] is not None
    assert res["base"]["prefill_only"]["completion_tokens"] == 3  # max_tokens 1
    assert "--renderer-num-workers 8" in res["renderer"]["vllm_commands"][0]
    assert "--renderer-num-workers" not in res["base"]["vllm_commands"][0]
    assert "standin_vllm flags:" in res["renderer"]["log_tail"]
    # a configuration's env reaches its server (and only its own), and its plan: where the env sets
    # OMP_NUM_THREADS, serve leaves it as it is (7: more than serve's own cap of 4), else serve sets its own
    assert "standin_vllm OMP_NUM_THREADS=7" in res["renderer"]["log_tail"]
    assert "standin_vllm OMP_NUM_THREADS=7" not in res["base"]["log_tail"]
    assert "OMP_NUM_THREADS=" not in res["renderer"]["plan"]["commands"][0]
    assert "OMP_NUM_THREADS=" in res["base"]["plan"]["commands"][0]
    # overlap 2: the second server started while the first was measured, each told its share of the card
    assert res["renderer"]["started_at_s"] < res["base"]["started_at_s"] + 30
    for n in ("base", "renderer"):
        share = float(re.search(r"--gpu-memory-utilization (\S+)", res[n]["vllm_commands"][0]).group(1))
        planned = res[n]["plan"]["planned_gib"] / res[n]["plan"]["gpu_gib"]
        assert share == pytest.approx(planned + 0.04, abs=0.006)
    md = (out / "sweep.md").read_text()
    assert "| base | 6 |" in md and "| renderer | 4 |" in md and "vllm serve" in md
    assert "| full_load_pages_per_s |" in md.replace("| steady_pages_per_s ", "")


def test_a_config_can_run_the_bench_modes_side_by_side(tmp_path):
    """`bench_modes`: pipeline, plain, ceiling and the client CPU split against the config's server (no
    pre-encoded load), the ratios in the JSON and a bench table in the Markdown."""
    # the stand-in vLLM serves "chandra" and answers as Chandra 1: the bench checks the profile against it
    bench = {
        "name": "bench",
        "load": False,
        "bench_pages": 4,
        "stage_pages": 2,
        "plain_pages": 2,
        "bench_modes": ["pipeline", "plain", "ceiling", "stages"],
    }
    spec = _run_spec(tmp_path, [bench], pages=2, defaults={"concurrency": 4, "profile": "chandra-1"})
    out = tmp_path / "out"
    p = _sweep_standin(spec, tmp_path, 18461)
    r = json.loads((out / "sweep.json").read_text())["results"]["bench"]
    assert p.returncode == 0 and r["ok"], (r.get("error"), p.stderr[-2000:])
    assert "load" not in r
    b = r["bench"]
    assert {m: b["modes"][m]["pages"] for m in ("pipeline", "plain", "ceiling")} == {
        "pipeline": 4,
        "plain": 2,
        "ceiling": 4,
    }
    assert "first 2 pages" in b["modes"]["plain"]["notes"]
    assert b["ratios"]["pipeline_vs_ceiling"] > 0 and b["ratios"]["pipeline_vs_plain"] > 0
    assert b["client_cpu_stages"]["pages"] == 2 and b["client_cpu_stages"]["total_mean_ms"] > 0
    md = (out / "sweep.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| bench | 4 |"))
    assert str(b["ratios"]["pipeline_vs_ceiling"]) in row


def test_full_load_rate_leaves_out_the_first_and_last_wave():
    """All pages start at once: the first wave completes in a burst, the last drains. The full-load rate is
    taken between the c-th completion and the c-th from the end; too short a run has none."""
    from ocrserve.bench.load import full_load_rate

    c = 4
    # a burst of 4 at 10 s, then one page every 0.5 s (2 pages/s) for 8 pages, then a drain of 4 spread out
    done = [10.0] * 4 + [10.5 + 0.5 * i for i in range(8)] + [16, 20, 25, 31]
    assert full_load_rate(done, c) == pytest.approx(2.0)
    assert full_load_rate(done[:11], c) is None  # fewer than 3 waves
    assert full_load_rate(list(reversed(done)), c) == pytest.approx(2.0)  # order of arrival does not matter


def test_a_config_measures_a_concurrency_curve_and_the_idle_latency_split(tmp_path):
    """`curve`: more loads on the same server at other requests in flight (pages = in flight x waves);
    `latency_probe`: first, on the idle server, time to first token of the prompt alone, with a tiny image and
    with a page, and to a first block; both in the JSON and the Markdown."""
    config = {"name": "c", "curve": [1, 2], "curve_waves": 3, "latency_probe": True}
    spec = _run_spec(tmp_path, [config], pages=8, defaults={"concurrency": 4}, prefill_pages=2)
    out = tmp_path / "out"
    p = _sweep_standin(spec, tmp_path, 18481)
    r = json.loads((out / "sweep.json").read_text())["results"]["c"]
    assert p.returncode == 0 and r["ok"], (r.get("error"), p.stderr[-2000:])
    assert {c: pt["pages"] for c, pt in r["curve"].items()} == {"1": 3, "2": 6}
    assert {c: pt["concurrency_per_endpoint"] for c, pt in r["curve"].items()} == {"1": 1, "2": 2}
    lat = r["latency"]
    assert lat["repeats"] == 2 and lat["block_tokens"] == 40
    for kind in ("tiny", "page"):
        assert len(lat[kind]["ttft_s"]) == 2 and lat[kind]["ttft_median_s"] > 0
    # the stand-in, stricter than vLLM, refuses a message without an image: recorded, the other kinds measured
    assert "400" in lat["text"]["error"]
    md = (out / "sweep.md").read_text()
    assert "| c | 1 | 3 |" in md and "| c | 2 | 6 |" in md and "| c | 4 | 8 |" in md  # the main load is a point
    assert "Idle latency, c" in md and "| page |" in md


def test_the_latency_probes_text_kind_sends_no_image():
    from ocrserve.bench.latency import probe_bodies
    from ocrserve.profiles import load_profile

    bodies = probe_bodies("chandra", load_profile("chandra-2"), _page_png(), 40)
    parts = {
        k: [p["type"] for m in b["messages"] if isinstance(m["content"], list) for p in m["content"]]
        for k, b in bodies.items()
    }
    assert "image_url" not in parts["text"] and "text" in parts["text"]
    assert parts["tiny"].count("image_url") == 1 and parts["page"].count("image_url") == 1
    assert bodies["page"]["stream"] and bodies["page"]["ignore_eos"] and bodies["page"]["max_tokens"] == 40


def _page_png(mode: str = "L") -> bytes:
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(3)
    a = np.full((64, 48) if mode == "L" else (64, 48, 3), 255, dtype=np.uint8)  # a white page, a noisy patch
    a[8:24, 4:40] = rng.integers(0, 256, a[8:24, 4:40].shape, dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a, mode).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_the_latency_probes_page_kinds_send_the_same_pixels_in_each_encoding(mode):
    """page, page_stored (PNG, deflate blocks stored) and page_bmp: the same RGB pixels reach the server."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    from ocrserve.bench.latency import probe_bodies
    from ocrserve.profiles import load_profile

    bodies = probe_bodies("chandra", load_profile("chandra-1"), _page_png(mode), 40)

    def pixels(kind: str) -> tuple[str, np.ndarray]:
        parts = [p for m in bodies[kind]["messages"] if isinstance(m["content"], list) for p in m["content"]]
        url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
        head, data = url.split(",", 1)
        return head, np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))

    (h0, a), (h1, b), (h2, c) = pixels("page"), pixels("page_stored"), pixels("page_bmp")
    assert h0 == h1 == "data:image/png;base64" and h2 == "data:image/bmp;base64"
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert len(json.dumps(bodies["page_stored"])) > len(json.dumps(bodies["page"]))  # a white page compresses


def test_a_failing_measurement_keeps_its_traceback(tmp_path):
    """A configuration whose measurement raises is a result with its error and where it was raised (an
    OSError's message alone may name no file); what was measured before it stays."""
    # the stand-in serves Chandra 1: the bench modes refuse a chandra-2 profile
    config = {"name": "wrong", "profile": "chandra-2", "bench_modes": ["pipeline"], "bench_pages": 2}
    spec = _run_spec(tmp_path, [config], pages=2, defaults={"concurrency": 2}, max_tokens=8)
    p = _sweep_standin(spec, tmp_path, 18491)
    r = json.loads((tmp_path / "out" / "sweep.json").read_text())["results"]["wrong"]
    assert p.returncode == 1 and not r["ok"]
    assert r["load"]["pages"] == 2 and r["load"]["failed"] == 0
    assert "chandra-1" in r["error"] and "Traceback" in r["error_trace"] and "bench_profile" in r["error_trace"]
