"""A `vllm` executable that serves the stand-in (tests/fakes/standin.py): `python -m tests.fakes.standin_vllm serve
MODEL --port N [any vLLM flags]`. Lets `ocrserve serve` (and the serving sweep) run end to end on the CPU."""

from __future__ import annotations

import os
import sys

from tests.fakes.standin import main as standin_main


def main(argv: list[str]) -> None:
    if not argv or argv[0] != "serve":
        sys.exit("usage: standin_vllm serve MODEL [--host H] [--port N] [vLLM flags]")
    host = argv[argv.index("--host") + 1] if "--host" in argv else "127.0.0.1"
    port = argv[argv.index("--port") + 1] if "--port" in argv else "8000"
    print("standin_vllm flags: " + " ".join(argv[2:]), flush=True)
    print("standin_vllm OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", "unset"), flush=True)
    standin_main(["--host", host, "--port", port])


if __name__ == "__main__":
    main(sys.argv[1:])
