"""Numbers and spaces inside right-to-left lines (issue 30.1, found on the held-out set: a Persian book's
table of contents read "\u06f2 . \u06f2" and "\u06f1 . \u06f2 . \u06f2" for its section numbers "\u06f2.\u06f2" and
"\u06f1.\u06f2.\u06f2", and "\u067e\u0627\u0631\u0627\u06af\u0631\u0627\u0641 \u0647\u0627" for one word). The character streams
below are made the way pdfium hands over such a XeTeX page: the number's glyphs stepping leftwards with
spaces pdfium put between glyphs that touch (their boxes lie over the glyphs, not in a gap)."""

from __future__ import annotations

from ocrserve.ingest.pdf.chars import Char, chars_to_lines

H0, H1 = 82.7, 93.7  # one row


def _c(text: str, x0: float, x1: float) -> Char:
    return Char(text, x0, H0, x1, H1, 11.0, 400, False, False)


def _word(text: str, right: float, width: float = 5.0) -> list[Char]:
    """A right-to-left word's letters in logical order, stepping leftwards, each touching the next."""
    return [_c(ch, right - (k + 1) * width, right - k * width) for k, ch in enumerate(text)]


def _text(chars: list[Char]) -> str:
    return " ".join(l.text for l in chars_to_lines(chars))


def test_a_number_stepping_leftwards_with_spaces_in_it_reads_as_on_the_page():
    two, dot = "\u06f2", "."
    # "\u06f2.\u06f2" at 470..484, pdfium's spaces over the glyphs, then a gap and a word on its left
    chars = [
        _c(two, 478.57, 484.02),
        _c(" ", 478.57, 480.39),
        _c(dot, 476.15, 478.57),
        _c(" ", 476.13, 477.96),
        _c(two, 470.68, 476.13),
        _c(" ", 470.68, 470.68),
        *_word("\u0634\u06a9\u0633\u062a\u0646", 458.9),
    ]
    assert _text(chars) == "\u06f2.\u06f2 \u0634\u06a9\u0633\u062a\u0646"
    # three levels: the glyphs come right to left ("\u06f2", ".", "\u06f2", ".", "\u06f1"); the page shows
    # "\u06f1.\u06f2.\u06f2" from the left, and that is the text (a number runs left to right)
    one = "\u06f1"
    xs = [(two, 490, 496), (dot, 487, 490), (two, 481, 487), (dot, 478, 481), (one, 472, 478)]
    chars = [_c(t, a, b) for t, a, b in xs]
    assert _text(chars) == f"{one}.{two}.{two}"


def test_a_space_between_touching_letters_is_no_word_gap_but_a_real_gap_is():
    """pdfium's zero-width space between two letters that touch (a Persian word whose letters do not join,
    "\u067e\u0627\u0631\u0627\u06af\u0631\u0627\u0641\u200c\u0647\u0627") is dropped; between two words apart on the page it stays."""
    first = _word("\u067e\u0627\u0631\u0627\u06af\u0631\u0627\u0641", 500.0)
    second = _word("\u0647\u0627", first[-1].x0)  # touches the word before
    third = _word("\u0645\u062a\u0646", second[-1].x0 - 4.0)  # a word gap of 4 pt
    gap = [_c(" ", second[0].x1, second[0].x1)]
    word_gap = [_c(" ", third[0].x1, third[0].x1)]
    text = _text([*first, *gap, *second, *word_gap, *third])
    # two words: the first whole (with or without a zero-width non-joiner inside), then the second
    assert [w.replace("\u200c", "") for w in text.split()] == [
        "\u067e\u0627\u0631\u0627\u06af\u0631\u0627\u0641\u0647\u0627",
        "\u0645\u062a\u0646",
    ]


def test_latin_words_keep_their_spaces():
    """The rule is for right-to-left script only: Latin words whose boxes touch keep pdfium's space."""
    chars = [_c("a", 10, 15), _c("b", 15, 20), _c(" ", 20, 20), _c("c", 20, 25)]
    assert _text(chars) == "ab c"
