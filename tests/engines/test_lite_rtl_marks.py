"""Fully vocalised Arabic (issue 30.1, found on the held-out set: a classical text and Quran samples came
out with their harakat on the neighbouring letter or alone between spaces, words cut and reordered):
PDFs made by tests/support/rtl_marks.py draw every mark as its own glyph over its letter, in four
content orders. The lite engine's Markdown must hold each vocalised word whole, in logical order."""

from __future__ import annotations

import unicodedata

import pytest

from ocrserve.ingest.pdf.chars import Char
from ocrserve.ingest.pdf.harakat import rebuild_vocalised_rows
from tests.support.lite import pdf_markdown
from tests.support.rtl import FONT
from tests.support.rtl_marks import MODES, VOCALISED, build_marks_pdf


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


@pytest.mark.skipif(not FONT.is_file(), reason="DejaVu Sans (fonts-dejavu-core) is not installed")
@pytest.mark.parametrize("mode", MODES)
def test_vocalised_words_come_out_whole(tmp_path, mode):
    md = _nfc(pdf_markdown(build_marks_pdf(tmp_path / f"marks-{mode}.pdf", mode)))
    flat = " ".join(md.split())
    for line in VOCALISED:
        assert _nfc(line) in flat, (line, md)
    # no mark stands alone as a word
    assert not [w for w in flat.split() if all(unicodedata.category(c).startswith("M") for c in w)], md


def _c(text: str, x0: float, x1: float, y0: float = 100.0, y1: float = 112.0) -> Char:
    return Char(text, x0, y0, x1, y1, 10.0, 400, False, False)


def test_marks_join_the_letter_under_them_and_spaces_come_from_the_gaps():
    """A row in visual order with the marks drawn before their letters and a stray space inside a word:
    the marks go on the letters their centres are over, the word gap (not the stray space) makes the
    space, and the row reads right to left; a number inside keeps its left-to-right order."""
    fatha, kasra = "\u064e", "\u0650"
    # visual, left to right: "12" then a gap, then "\u0628\u0650\u0643\u064e" drawn as
    # kaf (left) and beh (right), each mark before its letter, a space between them
    chars = [
        _c("1", 10, 16),
        _c("2", 16, 22),
        _c(fatha, 40, 44),
        _c("\u0643", 38, 46),
        _c(" ", 46, 46),
        _c(kasra, 48, 52),
        _c("\u0628", 46, 54),
    ]
    out = rebuild_vocalised_rows(chars)
    text = "".join(c.text for c in out).strip()
    assert _nfc(text) == _nfc(f"\u0628{kasra}\u0643{fatha} 12"), text


def test_rows_without_marks_are_left_as_they_came():
    chars = [_c("\u0643", 38, 46), _c(" ", 46, 46), _c("\u0628", 46, 54), _c("a", 60, 66)]
    assert rebuild_vocalised_rows(chars) is chars


def test_stacked_letters_keep_the_content_order():
    """Letters a font stacks (meem over jeem: their boxes share one column) read in the order the content
    stream gives them (logical here: it steps leftwards), not by a hair's difference of their centres."""
    word = [("\u0627", 52.29, 55.33), ("\u0644", 47.72, 52.29), ("\u0645", 43.88, 50.56), ("\u062c", 43.02, 51.69)]
    word += [("\u0644", 40.35, 43.85), ("\u0651", 37.87, 42.46), ("\u062f", 34.02, 41.27)]
    out = rebuild_vocalised_rows([_c(t, x0, x1) for t, x0, x1 in word])
    assert _nfc("".join(c.text for c in out).strip()) == _nfc("\u0627\u0644\u0645\u062c\u0644\u0651\u062f")


def test_a_mark_over_two_letters_goes_to_the_one_the_page_draws_it_with():
    """A font that sets its marks off their letters' centres (LuaTeX's Amiri, the held-out al-Jahiz page:
    "\u0641\u064e\u064a\u064e\u0642\u064f\u0648\u0644\u064f" read "\u0641\u064a\u064e\u064e\u0642\u064f\u0648\u0644\u064f"): a fatha over both yeh and feh is
    feh's, because on this page each mark over one letter only comes just before that letter in the
    content stream. Visual order, left to right; the marks first."""
    fatha = "\u064e"
    glyphs = [
        (fatha, 341.0, 345.5),  # over waw alone
        ("\u0648", 341.8, 346.6),
        (fatha, 347.5, 352.0),  # over qaf alone
        ("\u0642", 346.6, 351.12),
        (fatha, 350.0, 354.5),  # over yeh alone
        ("\u064a", 351.12, 354.56),
        (fatha, 352.0, 356.5),  # centre 354.25: over yeh and feh, nearer yeh's centre
        ("\u0641", 354.04, 357.84),
    ]
    out = rebuild_vocalised_rows([_c(t, x0, x1) for t, x0, x1 in glyphs])
    got = _nfc("".join(c.text for c in out).strip())
    assert got == _nfc(f"\u0641{fatha}\u064a{fatha}\u0642{fatha}\u0648{fatha}"), got
