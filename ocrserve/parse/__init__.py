from ocrserve.parse.blocks import canonical_label, parse_bbox, parse_output
from ocrserve.parse.repetition import is_repetition_loop, repetition_period

__all__ = ["parse_output", "parse_bbox", "canonical_label", "is_repetition_loop", "repetition_period"]
