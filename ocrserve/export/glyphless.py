"""A glyphless TrueType font, built in code, and the ToUnicode CMap that goes with it.

An invisible text layer needs a font that holds every character of every script without shipping
one: this font has two glyphs without ink, every advance one em, ascent 0.8 em and descent 0.2 em. It is
embedded as a CID font (Identity-H, every CID drawn with glyph 1, nothing is ever painted: the
glyph has no area, and the text is in render mode 3). A per-document ToUnicode CMap maps each CID to its character, so
copying, searching and extraction give the text back; the text matrix places and stretches each
line to its box. (Tesseract and OCRmyPDF use the same idea with a font file of their own.)
"""

from __future__ import annotations

import struct
from functools import lru_cache

UPEM = 1000
ASCENT = 0.8  # of an em, above the baseline
DESCENT = 0.2  # below it


def _checksum(data: bytes) -> int:
    data += b"\0" * (-len(data) % 4)
    return sum(struct.unpack(f">{len(data) // 4}I", data)) & 0xFFFFFFFF


def _name_table(family: str) -> bytes:
    recs, strings = [], b""
    for nid, text in ((1, family), (2, "Regular"), (4, family), (6, family)):
        s = text.encode("utf-16-be")
        recs.append(struct.pack(">6H", 3, 1, 0x409, nid, len(s), len(strings)))
        strings += s
    return struct.pack(">3H", 0, len(recs), 6 + 12 * len(recs)) + b"".join(recs) + strings


@lru_cache(maxsize=1)
def font_bytes(family: str = "OcrserveGlyphless") -> bytes:
    """The font file (about 700 bytes)."""
    asc, desc = int(ASCENT * UPEM), -int(DESCENT * UPEM)
    n = 2  # .notdef and the blank every CID draws, the same glyph
    # one degenerate contour, a zero-area line from the descent at
    # the left to the ascent at the right: nothing to fill, but it gives each character a box (pdfium
    # drops characters whose box is empty across the line, as rotated text with empty glyphs is)
    # (a little inside the line band: pdfium reports glyph boxes about 1% of an em taller at the top)
    gb, gt = desc + 10, asc - 20
    notdef = struct.pack(">hhhhhHHBBhhhh", 1, 0, gb, UPEM, gt, 1, 0, 1, 1, 0, UPEM, gb, gt - gb)
    head = struct.pack(
        ">IIIIHHqqhhhhHHhhh",
        0x00010000,
        0x00010000,
        0,
        0x5F0F3CF5,
        0x0003,
        UPEM,
        0,
        0,
        0,
        desc,
        UPEM,
        asc,
        0,
        8,
        2,
        0,
        0,
    )
    hhea = struct.pack(">IhhhHhhhhhhhhhhhH", 0x00010000, asc, desc, 0, UPEM, 0, 0, UPEM, 1, 0, 0, 0, 0, 0, 0, 0, n)
    maxp = struct.pack(">IHHHHHHHHHHHHHH", 0x00010000, n, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)
    hmtx = struct.pack(">hh", UPEM, 0) * n
    loca = struct.pack(">HHH", 0, len(notdef) // 2, len(notdef))
    # cmap format 4: the space maps to glyph 1, then the closing 0xFFFF segment
    seg = (
        struct.pack(">7H", 4, 32, 0, 4, 4, 1, 0)
        + struct.pack(">HH", 0x20, 0xFFFF)
        + b"\0\0"
        + struct.pack(">HH", 0x20, 0xFFFF)
        + struct.pack(">hh", 1 - 0x20, 1)
        + struct.pack(">HH", 0, 0)
    )
    cmap = struct.pack(">HHHHI", 0, 1, 3, 1, 12) + seg
    post = struct.pack(">IIhhIIIII", 0x00030000, 0, -100, 50, 0, 0, 0, 0, 0)
    os2 = struct.pack(
        ">HhHHHhhhhhhhhhhh10sIIII4sHHHhhhHHIIhhHHH",
        4,
        UPEM // 2,
        400,
        5,
        0,
        650,
        700,
        0,
        140,
        650,
        700,
        0,
        480,
        50,
        250,
        0,
        b"\0" * 10,
        0,
        0,
        0,
        0,
        b"NONE",
        0x40,
        0x20,
        0x20,
        asc,
        desc,
        0,
        asc,
        -desc,
        1,
        0,
        500,
        700,
        0,
        0x20,
        0,
    )
    tables = {
        b"OS/2": os2,
        b"cmap": cmap,
        b"glyf": notdef + notdef,
        b"head": head,
        b"hhea": hhea,
        b"hmtx": hmtx,
        b"loca": loca,
        b"maxp": maxp,
        b"name": _name_table(family),
        b"post": post,
    }
    num = len(tables)
    es = num.bit_length() - 1
    header = struct.pack(">IHHHH", 0x00010000, num, 16 * (1 << es), es, 16 * num - 16 * (1 << es))
    offset = 12 + 16 * num
    dirs, body, head_at = b"", b"", 0
    for tag in sorted(tables):
        data = tables[tag]
        if tag == b"head":
            head_at = offset + len(body)
        dirs += struct.pack(">4sIII", tag, _checksum(data), offset + len(body), len(data))
        body += data + b"\0" * (-len(data) % 4)
    font = bytearray(header + dirs + body)
    struct.pack_into(">I", font, head_at + 8, (0xB1B0AFBA - _checksum(bytes(font))) & 0xFFFFFFFF)
    return bytes(font)


def to_unicode_cmap(chars: list[str]) -> bytes:
    """ToUnicode CMap mapping CID i+1 to chars[i] (any code point, astral ones as UTF-16 pairs)."""
    out = [
        "/CIDInit /ProcSet findresource begin",
        "12 dict begin",
        "begincmap",
        "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def",
        "/CMapName /Adobe-Identity-UCS def",
        "/CMapType 2 def",
        "1 begincodespacerange",
        "<0000> <FFFF>",
        "endcodespacerange",
    ]
    for start in range(0, len(chars), 100):  # at most 100 entries per bfchar section
        part = chars[start : start + 100]
        out.append(f"{len(part)} beginbfchar")
        out += [f"<{start + i + 1:04X}> <{c.encode('utf-16-be').hex().upper()}>" for i, c in enumerate(part)]
        out.append("endbfchar")
    out += ["endcmap", "CMapName currentdict /CMap defineresource pop", "end", "end"]
    return "\n".join(out).encode("ascii")


def cid_to_gid_map(count: int) -> bytes:
    """CIDToGIDMap for CIDs 0..count: every one drawn with glyph 1 (pdfium gives a CID outside the
    map no glyph, hence no box)."""
    return struct.pack(">H", 0) + struct.pack(">H", 1) * count
