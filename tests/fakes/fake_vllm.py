"""A stand-in for the `vllm` executable, for supervision tests: `python tests/fake_vllm.py serve MODEL --port N ...`.

It accepts any vLLM flags (only --host, --port, --served-model-name and --max-model-len matter: its
/v1/models card lists the served name as `id`, MODEL as `root` and the max_model_len, as vLLM's does)
and behaves by the environment:

  FAKE_VLLM_MODE     healthy (default): answer /health and /v1/models after FAKE_VLLM_DELAY seconds
                     die: healthy, then exit 3 after FAKE_VLLM_DIE_AFTER seconds
                     die_once: like die on the first start (counted in FAKE_VLLM_STATE), healthy after
                     oom / nogpu / notfound / offline: print vLLM's real failure to stderr, exit 1
                     hang: never answers (health timeout)
  FAKE_VLLM_DELAY    seconds before the HTTP server answers (default 0)
  FAKE_VLLM_DIE_AFTER seconds a "die" server lives after it is healthy (default 1)
  FAKE_VLLM_STATE    a file counting starts (die_once)
  FAKE_VLLM_PIDFILE  append the pids of this process and of its "engine core" child (a sleeping
                     grandchild, as vLLM forks one) so a test can check that none outlives a stop
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OOM = """\
(EngineCore_DP0 pid=4242) ERROR 01-01 12:00:00 [core.py:842] EngineCore failed to start.
(EngineCore_DP0 pid=4242) ERROR 01-01 12:00:00 [core.py:842] Traceback (most recent call last):
(EngineCore_DP0 pid=4242) ERROR 01-01 12:00:00 [core.py:842]   File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3512, in profile_run
(EngineCore_DP0 pid=4242) ERROR 01-01 12:00:00 [core.py:842]     hidden_states = self._dummy_run(self.max_num_tokens, is_profile=True)
(EngineCore_DP0 pid=4242) ERROR 01-01 12:00:00 [core.py:842] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of 139.80 GiB of which 1.05 GiB is free. Including non-PyTorch memory, this process has 138.74 GiB memory in use.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""
NOGPU = """\
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/vllm/platforms/cuda.py", line 120, in get_device_capability
    major, minor = torch.cuda.get_device_capability(device_id)
RuntimeError: No CUDA GPUs are available
"""
NOTFOUND = """\
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status
huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-abc)
Repository Not Found for url: https://huggingface.co/api/models/datalab-to/no-such-model/revision/main.
"""
OFFLINE = """\
Traceback (most recent call last):
huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.
"""
FAILURES = {"oom": OOM, "nogpu": NOGPU, "notfound": NOTFOUND, "offline": OFFLINE}


def _arg(argv: list[str], flag: str, default: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv else default


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "serve":
        print("usage: fake_vllm.py serve MODEL [flags]", file=sys.stderr)
        return 2
    host = _arg(argv, "--host", "127.0.0.1")
    port = int(_arg(argv, "--port", "8000"))
    model = argv[1] if len(argv) > 1 else "model"
    name = _arg(argv, "--served-model-name", model)
    card = {"id": name, "object": "model", "root": model}
    if "--max-model-len" in argv:
        card["max_model_len"] = int(_arg(argv, "--max-model-len", "0"))
    mode = os.environ.get("FAKE_VLLM_MODE", "healthy")
    delay = float(os.environ.get("FAKE_VLLM_DELAY", "0"))
    state = os.environ.get("FAKE_VLLM_STATE")
    starts = 0
    if state:
        starts = int(open(state).read() or 0) if os.path.exists(state) else 0
        with open(state, "w") as f:
            f.write(str(starts + 1))
    print(f"INFO fake vllm {mode} on {host}:{port} (start {starts + 1}) argv={argv}", flush=True)
    if mode in FAILURES:
        time.sleep(delay)
        sys.stderr.write(FAILURES[mode])
        return 1
    core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])  # the "engine core"
    pidfile = os.environ.get("FAKE_VLLM_PIDFILE")
    if pidfile:
        with open(pidfile, "a") as f:
            f.write(f"{os.getpid()}\n{core.pid}\n")
    if mode == "hang":
        time.sleep(3600)
        return 0
    time.sleep(delay)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body = b""
            elif self.path == "/v1/models":
                body = json.dumps({"object": "list", "data": [card]}).encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("INFO Application startup complete.", flush=True)
    if mode == "die" or (mode == "die_once" and starts == 0):
        time.sleep(float(os.environ.get("FAKE_VLLM_DIE_AFTER", "1")))
        print("ERROR EngineCore died unexpectedly", file=sys.stderr, flush=True)
        os._exit(3)  # the engine core child stays behind, as a crashed vLLM's would
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
