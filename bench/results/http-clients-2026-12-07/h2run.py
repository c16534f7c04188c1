import os
import runpy
import sys

if os.environ.get("H2") == "1":
    import httpx2

    httpx2.alias_httpx()
sys.argv = ["bench.client_cpu_stages", *sys.argv[1:]]
runpy.run_module("bench.client_cpu_stages", run_name="__main__")
