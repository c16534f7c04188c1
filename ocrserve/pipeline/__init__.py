"""The conversion pipeline: per-page steps (page.py), outputs (output.py, target.py), and two
schedulers over them: local.py (asyncio, one process) and ray.py (Ray Data, a cluster)."""

from ocrserve.pipeline.convert import aconvert, convert
from ocrserve.pipeline.local import Converter, DocResult, RunSummary

__all__ = ["Converter", "DocResult", "RunSummary", "aconvert", "convert"]
