"""bench/sweep_background.sh: a sweep started in the background survives its working tree being replaced
(the device tool replaces the repository copy on each call; the 2026-12-04 run's bench modes then failed
with `FileNotFoundError: [Errno 2]` at os.getcwd())."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "sweep_background.sh"

# a stand-in `python3 -m ocrserve bench sweep`: waits until told (told only once `start` has returned: a
# `start` that waits for the sweep fails it), then needs its working directory
FAKE_MAIN = """
import os, sys, time
from pathlib import Path
go = Path(sys.argv[sys.argv.index("--go") + 1])
for _ in range(400):
    if go.exists():
        break
    time.sleep(0.05)
else:
    sys.exit("never told to go: `start` did not return while the sweep ran")
print("cwd", os.getcwd(), "args", sys.argv[1:])
print("spec", Path("bench/sweeps/spec.json").read_text())
"""


def test_background_sweep_outlives_its_working_tree(tmp_path):
    tree = tmp_path / "tree"
    (tree / "ocrserve").mkdir(parents=True)
    (tree / "ocrserve" / "__init__.py").write_text("")
    (tree / "ocrserve" / "__main__.py").write_text(FAKE_MAIN)
    (tree / "bench" / "sweeps").mkdir(parents=True)
    (tree / "bench" / "sweeps" / "spec.json").write_text('{"pages": 3}')
    res, go = tmp_path / "res", tmp_path / "go"
    out = subprocess.run(
        ["bash", str(SCRIPT), "start", str(res), "--spec", "bench/sweeps/spec.json", "--go", str(go)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    shutil.rmtree(tree)  # the next device call replaces the working tree
    go.touch()
    for _ in range(400):
        if (res / "rc").exists():
            break
        time.sleep(0.05)
    log = (res / "sweep.log").read_text()
    assert (res / "rc").read_text().strip() == "0", log
    assert "['bench', 'sweep', '--spec'" in log and 'spec {"pages": 3}' in log
    assert str(tree) not in log  # it ran from its own copy
