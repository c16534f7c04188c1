"""Memory planner and vLLM command builder of `ocrserve serve` (pure, no processes)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from ocrserve.profiles import load_profile
from ocrserve.vllm.gpus import parse_nvidia_smi
from ocrserve.vllm.launch import ServeOptions, build_layout
from ocrserve.vllm.plan import GIB, ModelShape, page_budget, plan_replica

H200 = 139.8
C1 = load_profile("chandra-1")
C2 = load_profile("chandra-2")
S1 = ModelShape.from_profile(C1)


def _flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, f"{name} appears {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


def test_page_budget_from_pixel_budget():
    b = page_budget(C1)
    assert b.max_image_tokens == C1.max_pixels // 32**2 == 6144
    assert 300 < b.prompt_tokens < 800
    assert b.max_output_tokens == C1.sampling.max_tokens
    assert b.max_model_len >= 6144 + b.prompt_tokens + C1.sampling.max_tokens and b.max_model_len % 256 == 0
    assert b.typical_image_tokens < b.max_image_tokens


def test_kv_bytes_per_token_from_shape():
    # 2 (K,V) x 36 layers x 8 KV heads x 128 head dim x 2 bytes
    assert S1.kv_bytes_per_token(2) == 2 * 36 * 8 * 128 * 2
    assert S1.kv_bytes_per_token(1) * 2 == S1.kv_bytes_per_token(2)


def test_weights_close_to_measured():
    # measured on the H200 for Chandra 1 in vLLM 0.26: 16.8 GiB bf16, 10.0 GiB fp8
    assert abs(S1.weight_bytes(False) / GIB - 16.8) < 1.0
    assert abs(S1.weight_bytes(True) / GIB - 10.0) < 1.0


def test_lean_fp8_chandra1_h200_uses_far_less_than_max():
    lean = plan_replica(C1, S1, H200, memory="lean", quantization="fp8", concurrency=128)
    mx = plan_replica(C1, S1, H200, memory="max", quantization="none", concurrency=128)
    assert lean.fraction_of_gpu < 0.5
    assert lean.total_gib <= 0.5 * mx.total_gib
    assert lean.expected_concurrency == 128
    args = lean.vllm_args()
    assert int(_flag(args, "--kv-cache-memory-bytes")) == lean.kv_cache_bytes
    assert "--gpu-memory-utilization" not in args
    assert _flag(args, "--quantization") == "fp8" and _flag(args, "--kv-cache-dtype") == "fp8"
    assert _flag(args, "--max-num-seqs") == "128"
    assert int(_flag(args, "--max-model-len")) == page_budget(C1).max_model_len
    # the KV cache holds 128 typical pages
    assert lean.kv_tokens >= 128 * lean.planned_tokens_per_page


def test_max_plan_takes_90_percent():
    mx = plan_replica(C1, S1, H200, memory="max", quantization="none", concurrency=128)
    args = mx.vllm_args()
    assert _flag(args, "--gpu-memory-utilization") == "0.9"
    assert "--kv-cache-memory-bytes" not in args and "--quantization" not in args
    assert mx.fraction_of_gpu == pytest.approx(0.9, abs=0.01)


def test_lean_kv_scales_with_concurrency_and_dtype():
    a = plan_replica(C1, S1, H200, concurrency=32)
    bf = plan_replica(C1, S1, H200, concurrency=128)
    assert bf.quantization == "none" and "--quantization" not in bf.vllm_args()  # bf16 unless asked
    assert bf.kv_cache_bytes > 3.5 * a.kv_cache_bytes
    f8 = plan_replica(C1, S1, H200, concurrency=128, quantization="fp8")
    assert bf.kv_cache_bytes == pytest.approx(2 * f8.kv_cache_bytes, rel=0.01)
    assert bf.weights_gib > f8.weights_gib


def test_plan_too_big_for_gpu_is_clear_error():
    with pytest.raises(ValueError, match=r"GiB but the GPU has 24.0 GiB: lower --concurrency, use --quantization fp8"):
        plan_replica(C1, S1, 24.0, concurrency=512, quantization="none")
    with pytest.raises(ValueError, match="GiB but the GPU has 24.0 GiB") as e:
        plan_replica(C1, S1, 24.0, concurrency=512, quantization="fp8")
    assert "--quantization fp8" not in str(e.value)


def test_shape_from_model_folder(tmp_path: Path):
    cfg = {
        "model_type": "qwen3_vl",
        "tie_word_embeddings": True,
        "text_config": {
            "num_hidden_layers": 12,
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "vocab_size": 1000,
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    s = S1.with_model_config(tmp_path)
    assert (s.decoder_layers, s.hidden_size, s.num_kv_heads, s.head_dim, s.vocab_size) == (12, 1024, 2, 64, 1000)
    assert s.tie_word_embeddings
    assert s.kv_bytes_per_token(2) == 2 * 12 * 2 * 64 * 2


def test_hybrid_model_counts_only_attention_layers(tmp_path: Path):
    types = ["linear_attention"] * 3 + ["full_attention"]
    (tmp_path / "config.json").write_text(
        json.dumps({"text_config": {"num_hidden_layers": 8, "layer_types": types * 2}})
    )
    s = ModelShape.from_profile(C2).with_model_config(tmp_path)
    assert s.kv_layers == 2


def test_hybrid_lean_plan_holds_the_linear_attention_state_of_every_page(tmp_path: Path):
    """Chandra 2 (Qwen3.5): 24 Gated-DeltaNet layers keep a fixed state a sequence in the same pool as the KV cache."""
    cfg = json.loads((Path(__file__).resolve().parents[2] / "bench/models/chandra2-shape/config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shape = ModelShape.from_profile(C2).with_model_config(tmp_path)
    # per layer: fp32 state 32 heads x 128 x 128, bf16 conv window (2*16*128 + 32*128) x 3
    per_layer = 32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2
    assert shape.kv_layers == 8 and shape.linear_state_bytes_per_seq == 24 * per_layer
    plan = plan_replica(C2, shape, H200, memory="lean", concurrency=64, prefix_caching=False)
    # vLLM 0.26's pool: an attention block of one layer (4 KiB a token in bf16) as large as one layer's
    # state -> 16 * ceil(per_layer / (16 * 4096)) = 528 tokens; 8 attention + 24 linear layers in groups
    # of 8 (1 attention group, 3 linear ones); a block of the pool is a page in 8 layer slots
    assert plan.block_tokens == 528
    block = 528 * 4096 * 8
    assert plan.linear_state_bytes == 64 * 3 * block  # one block a linear group a sequence
    per_page = 3 + -(-plan.planned_tokens_per_page // 528)  # state blocks + the page's tokens in whole blocks
    assert plan.kv_cache_bytes == (64 * per_page + 1) * block  # + vLLM's null block
    assert plan.kv_tokens >= 64 * plan.planned_tokens_per_page  # the state does not eat the pages' KV
    assert "linear-attention state, blocks of 528 tokens" in plan.describe()
    # fp8 KV halves an attention token, so a block holds twice the tokens
    assert plan_replica(C2, shape, H200, memory="lean", quantization="fp8").block_tokens == 1056
    # prefix caching ('align' mode): the state block of the step before is held beside the current one
    cached = plan_replica(C2, shape, H200, memory="lean", concurrency=64)
    assert cached.linear_state_bytes == 64 * 6 * block
    assert cached.kv_cache_bytes == (64 * (per_page + 3) + 1) * block
    # a model without linear attention plans no state
    assert plan_replica(C1, S1, H200, memory="lean").linear_state_bytes == 0


def test_nvidia_smi_parse():
    gpus = parse_nvidia_smi("0, 143771, NVIDIA H200\n1, 143771 MiB, NVIDIA H200\n")
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].memory_gib == pytest.approx(140.4, abs=0.1) and gpus[1].name == "NVIDIA H200"


# ------------------------------------------------------------------------------- command builder
def _layout(parallel="dp", gpus=(0, 1), **kw):
    share = 1 / len(gpus) if parallel == "tp" else 1.0
    plan = plan_replica(C1, S1, H200, weight_share=share)
    opts = ServeOptions(model="/models/c1", gpus=list(gpus), parallel=parallel, port=9000, **kw)
    return build_layout(opts, C1, plan), plan


def test_dp_one_replica_per_gpu():
    layout, plan = _layout("dp", (2, 5), extra_args=["--enforce-eager", "--max-num-seqs", "64"], router=False)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in layout.processes] == ["2", "5"]
    assert [p.port for p in layout.processes] == [9000, 9001]
    assert layout.endpoints == ["http://127.0.0.1:9000/v1", "http://127.0.0.1:9001/v1"]
    argv = layout.processes[1].argv
    assert argv[:3] == ["vllm", "serve", "/models/c1"] and _flag(argv, "--port") == "9001"
    assert json.loads(_flag(argv, "--limit-mm-per-prompt")) == {"image": 1, "video": 0}
    assert json.loads(_flag(argv, "--mm-processor-kwargs")) == {"max_pixels": C1.max_pixels}
    assert _flag(argv, "--served-model-name") == "chandra"
    assert "--enable-prefix-caching" in argv and _flag(argv, "--mm-processor-cache-gb") == "1"
    # unknown flags pass through, after ours (vLLM keeps the last occurrence)
    assert argv[-3:] == ["--enforce-eager", "--max-num-seqs", "64"]
    # the printed command is a shell line that round-trips
    words = shlex.split(layout.processes[0].shell())
    assert words[words.index("vllm") :] == layout.processes[0].argv


def test_dp_on_several_gpus_is_one_endpoint_the_router():
    """The router takes the port asked for; the replicas move to the ports after it, on loopback."""
    layout, _ = _layout("dp", (2, 5), host="0.0.0.0")
    *replicas, router = layout.processes
    assert [p.role for p in replicas] == ["replica", "replica"] and router.role == "router"
    assert [(p.host, p.port) for p in replicas] == [("127.0.0.1", 9001), ("127.0.0.1", 9002)]
    assert [_flag(p.argv, "--host") for p in replicas] == ["127.0.0.1", "127.0.0.1"]
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in replicas] == ["2", "5"]
    assert router.argv[1:3] == ["-m", "ocrserve.vllm.router"] and (router.host, router.port) == ("0.0.0.0", 9000)
    assert _flag(router.argv, "--replicas") == "http://127.0.0.1:9001,http://127.0.0.1:9002"
    assert layout.endpoints == ["http://0.0.0.0:9000/v1"]
    # one GPU: no router, the replica on the port asked for
    layout, _ = _layout("dp", (3,))
    assert [(p.role, p.port) for p in layout.processes] == [("replica", 9000)]
    assert layout.endpoints == ["http://127.0.0.1:9000/v1"]


def test_dp_vllm_backend_single_endpoint():
    layout, _ = _layout("dp", (0, 1, 2), dp_backend="vllm")
    (p,) = layout.processes
    assert _flag(p.argv, "--data-parallel-size") == "3" and p.env["CUDA_VISIBLE_DEVICES"] == "0,1,2"


def test_tp_splits_kv_per_gpu():
    layout, plan = _layout("tp", (0, 1))
    (p,) = layout.processes
    assert _flag(p.argv, "--tensor-parallel-size") == "2"
    single = plan_replica(C1, S1, H200)
    assert plan.kv_cache_bytes == pytest.approx(single.kv_cache_bytes / 2, rel=0.01)
    assert int(_flag(p.argv, "--kv-cache-memory-bytes")) == plan.kv_cache_bytes


def test_epd_encoder_decoder_and_proxy():
    layout, plan = _layout("epd", (0, 1, 2), load_format="dummy")
    roles = [p.role for p in layout.processes]
    assert roles == ["encoder", "decoder", "decoder", "proxy"]
    enc, dec = layout.processes[0], layout.processes[1]
    assert "--mm-encoder-only" in enc.argv and "--no-enable-prefix-caching" in enc.argv
    ec_e = json.loads(_flag(enc.argv, "--ec-transfer-config"))
    ec_d = json.loads(_flag(dec.argv, "--ec-transfer-config"))
    assert ec_e["ec_role"] == "ec_producer" and ec_d["ec_role"] == "ec_consumer"
    assert ec_e["ec_connector"] == ec_d["ec_connector"] == "ECExampleConnector"
    assert ec_e["ec_connector_extra_config"] == ec_d["ec_connector_extra_config"]
    # the encoder's KV cache is one sequence, the decoder's the lean plan
    assert int(_flag(enc.argv, "--kv-cache-memory-bytes")) < int(_flag(dec.argv, "--kv-cache-memory-bytes"))
    assert _flag(dec.argv, "--load-format") == "dummy"
    proxy = layout.processes[-1]
    assert proxy.port == 9000 and layout.endpoints == ["http://127.0.0.1:9000/v1"]
    assert _flag(proxy.argv, "--encoders") == enc.url
    assert _flag(proxy.argv, "--decoders").split(",") == [p.url for p in layout.processes if p.role == "decoder"]
    assert len({p.port for p in layout.processes}) == 4


def test_chandra2_gets_its_launchers_server_flags_once():
    """chandra-ocr 0.2.0's launcher: --dtype bfloat16 and the processor's pixel bounds (which replace ocrserve's
    own --mm-processor-kwargs), after ocrserve's flags and before the flags given after `--`."""
    plan = plan_replica(C2, ModelShape.from_profile(C2), H200)
    for parallel, gpus in [("dp", (0,)), ("tp", (0, 1)), ("epd", (0, 1))]:
        opts = ServeOptions(model=C2.checkpoint, gpus=list(gpus), parallel=parallel, extra_args=["--dtype", "auto"])
        for p in build_layout(opts, C2, plan).processes:
            if p.role == "proxy":
                continue
            assert json.loads(_flag(p.argv, "--mm-processor-kwargs")) == {"min_pixels": 3136, "max_pixels": 6291456}
            assert p.argv.count("--dtype") == 2 and p.argv[-2:] == ["--dtype", "auto"]  # ours, then the user's
            assert "--quantization" not in p.argv


def test_the_processors_pixel_bounds_are_the_profiles_own():
    """Declared once, on the profile (server_min_pixels, server_max_pixels, server_pixel_bounds): a profile
    with other bounds gets those in the server's --mm-processor-kwargs, not Chandra 2's numbers."""
    custom = C2.model_copy(update={"server_min_pixels": 4096, "server_max_pixels": 4194304})
    plan = plan_replica(custom, ModelShape.from_profile(custom), H200)
    (proc,) = build_layout(ServeOptions(model=custom.checkpoint, gpus=[0]), custom, plan).processes
    assert json.loads(_flag(proc.argv, "--mm-processor-kwargs")) == {"min_pixels": 4096, "max_pixels": 4194304}
    plain = C2.model_copy(update={"server_pixel_bounds": False})  # ocrserve's own: the client's pixel budget
    (proc,) = build_layout(ServeOptions(model=plain.checkpoint, gpus=[0]), plain, plan).processes
    assert json.loads(_flag(proc.argv, "--mm-processor-kwargs")) == {"max_pixels": plain.max_pixels}


def test_epd_needs_two_gpus():
    with pytest.raises(ValueError, match="at least 2 GPUs"):
        _layout("epd", (0,))


def test_duplicate_gpu_rejected():
    with pytest.raises(ValueError, match="twice"):
        _layout("dp", (0, 0))


def test_epd_encoder_request_keeps_only_the_image():
    from ocrserve.vllm.epd_proxy import encoder_request

    body = {
        "model": "chandra",
        "max_tokens": 12384,
        "stream": True,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "text", "text": "OCR"},
                ],
            }
        ],
    }
    enc = encoder_request(body)
    assert enc["max_tokens"] == 1 and enc["stream"] is False
    assert enc["messages"][0]["content"] == [body["messages"][0]["content"][0]]


def test_api_renderer_threads_by_default_and_on_request():
    """8 API renderer threads by default (vLLM's one thread capped vision + prefill: sweep-2026-12-03c);
    0 leaves the flag out; a flag after `--` still wins (it comes last)."""
    layout, _ = _layout("dp", (0,))
    assert _flag(layout.processes[0].argv, "--renderer-num-workers") == "8"
    layout, _ = _layout("dp", (0,), renderer_workers=0)
    assert "--renderer-num-workers" not in layout.processes[0].argv
    layout, _ = _layout("epd", (0, 1))
    assert all(_flag(p.argv, "--renderer-num-workers") == "8" for p in layout.processes if p.role != "proxy")
    argv = _layout("dp", (0,), extra_args=["--renderer-num-workers", "2"])[0].processes[0].argv
    assert argv[-2:] == ["--renderer-num-workers", "2"]


def test_renderer_threads_left_out_for_an_older_vllm():
    from ocrserve.vllm.launch import renderer_workers_for

    assert renderer_workers_for(8, "0.26.0") == (8, None)
    assert renderer_workers_for(8, "0.27.1rc2") == (8, None)
    assert renderer_workers_for(8, None) == (8, None)  # not installed here (an external --vllm-bin): as asked
    n, warning = renderer_workers_for(8, "0.11.2")
    assert n == 0 and "0.11.2" in warning and "--renderer-num-workers" in warning
    assert renderer_workers_for(0, "0.26.0") == (0, None)


def test_vllm_processes_get_image_processor_threads(monkeypatch):
    """vLLM's API server runs the image processor on $OMP_NUM_THREADS threads (one when unset): each vLLM process
    gets up to 4, the host's cores shared among them; the router none; a user's own setting wins."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    layout, _ = _layout("dp", (0, 1))
    *replicas, router = layout.processes
    assert [p.env["OMP_NUM_THREADS"] for p in replicas] == ["4", "4"] and "OMP_NUM_THREADS" not in router.env
    assert replicas[0].shell().startswith("CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=4 vllm serve")
    layout, _ = _layout("dp", tuple(range(8)))
    assert {p.env.get("OMP_NUM_THREADS") for p in layout.processes if p.role == "replica"} == {"2"}
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    layout, _ = _layout("dp", (0,))
    assert "OMP_NUM_THREADS" not in layout.processes[0].env  # inherited from the user's environment as it is
