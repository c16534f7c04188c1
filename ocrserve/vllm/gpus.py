"""Local GPUs as nvidia-smi reports them."""

from __future__ import annotations

import shutil
import subprocess

from ocrserve.errors import OcrserveError
from ocrserve.vllm.plan import GPU

QUERY = ["nvidia-smi", "--query-gpu=index,memory.total,name", "--format=csv,noheader,nounits"]


class NoGPUError(OcrserveError, RuntimeError):
    pass


def parse_nvidia_smi(text: str) -> list[GPU]:
    """Rows `0, 143771, NVIDIA H200` (MiB, with or without a ` MiB` unit) -> GPUs."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        mib = float(parts[1].split()[0])
        gpus.append(GPU(index=int(parts[0]), memory_gib=mib / 1024, name=parts[2] if len(parts) > 2 else "GPU"))
    return gpus


def detect_gpus() -> list[GPU]:
    """The local NVIDIA GPUs; NoGPUError when nvidia-smi is absent, fails or lists none."""
    if shutil.which("nvidia-smi") is None:
        raise NoGPUError("no GPU found: nvidia-smi is not on PATH (no NVIDIA driver on this machine)")
    try:
        out = subprocess.run(QUERY, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NoGPUError(f"no GPU found: nvidia-smi failed: {e}") from e
    if out.returncode != 0:
        raise NoGPUError(f"no GPU found: nvidia-smi failed: {(out.stderr or out.stdout).strip()[:300]}")
    gpus = parse_nvidia_smi(out.stdout)
    if not gpus:
        raise NoGPUError("no GPU found: nvidia-smi lists none")
    return gpus
