"""What a character's font says about its style: bold (by weight or name), monospaced (by the font's
fixed-pitch flag or name: code in a PDF is set in Courier, DejaVu Sans Mono, Latin Modern Mono...)."""

from __future__ import annotations

import ctypes
import re

import pypdfium2.raw as pdfium_c

_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_MONO_NAME = re.compile(r"mono|courier|consol|typewriter|cmtt|sfmono|menlo|inconsolata|code", re.IGNORECASE)
_FIXED_PITCH = 1  # the PDF font descriptor's FixedPitch flag


def font_traits(raw_tp, i: int, cache: dict[tuple[bytes, int], tuple[bool, bool]]) -> tuple[bool, bool]:
    """(bold by name, monospaced) of character i's font (base-14 fonts report weight 400 even when they
    are Helvetica-Bold); cached by font name and flags."""
    buf = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    n = pdfium_c.FPDFText_GetFontInfo(raw_tp, i, buf, 128, flags)
    if n <= 0:
        return False, False
    key = (buf.raw[: max(n - 1, 0)], flags.value)
    if key not in cache:
        name = key[0].decode("latin-1", "replace")
        cache[key] = (bool(_BOLD_NAME.search(name)), bool(flags.value & _FIXED_PITCH or _MONO_NAME.search(name)))
    return cache[key]
