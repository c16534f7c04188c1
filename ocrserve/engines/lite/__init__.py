"""Engine `lite`: the embedded CPU engine (PDF text layer + RapidOCR) and its layout analysis."""

from ocrserve.engines.lite.engine import LiteEngine

__all__ = ["LiteEngine"]
