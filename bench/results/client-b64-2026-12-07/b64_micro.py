"""CPU ms to base64 a page's PNG-sized buffer (393,000 bytes, Chandra 2's mean page PNG): the standard
library against pybase64, 300 each, this thread's CPU clock.  python bench/results/client-b64-2026-12-07/b64_micro.py"""

import base64
import os
import platform
import time

import pybase64

data = os.urandom(393_000)
assert pybase64.b64encode(data) == base64.b64encode(data)
print(f"python {platform.python_version()}, pybase64 {pybase64.__version__}, {platform.machine()}")
for name, f in (("base64.b64encode", base64.b64encode), ("pybase64.b64encode", pybase64.b64encode)):
    for rnd in range(3):
        t = time.thread_time()
        for _ in range(300):
            f(data)
        print(f"{name} round {rnd}: {(time.thread_time() - t) / 300 * 1000:.3f} ms")
