"""Repetition-loop detection: real loops flagged, long legitimate content not."""

from __future__ import annotations

import pytest

from ocrserve.parse import is_repetition_loop, repetition_period
from tests.support.corpus_util import CORPUS, corpus_files

HEAD = '<div data-bbox="[50, 40, 970, 90]" data-label="Text"><p>Results follow.</p></div><div data-bbox="[50, 100, 970, 1000]" data-label="Table"><table>'


def test_single_token_loop():
    text = "<p>The values are " + "0 " * 400
    assert repetition_period(text) == 2
    assert is_repetition_loop("<p>" + "a" * 500)


def test_phrase_loop():
    assert repetition_period("<p>Intro. " + "and the results are shown below, " * 40) == len(
        "and the results are shown below, "
    )


def test_table_rows_repeated_to_the_end():
    row = "<tr><td>x</td></tr>"
    assert repetition_period(HEAD + row * 100) == len(row)


def test_loop_cut_mid_unit():
    row = "<tr><td>N/A</td><td>N/A</td></tr>"
    text = HEAD + row * 60
    for cut in range(1, len(row)):
        assert repetition_period(text[:-cut]) == len(row), cut


def test_long_unit_loop():
    para = "<p>" + " ".join(f"word{i}" for i in range(80)) + "</p>"
    assert len(para) > 300
    assert repetition_period("<div>" + para * 8) == len(para)


def test_corpus_loop_detected_and_other_corpus_files_not():
    assert is_repetition_loop((CORPUS / "c1_repetition.html").read_text())
    for path in corpus_files():
        if path.name not in ("c1_repetition.html", "c1_deep_nesting.html"):
            assert not is_repetition_loop(path.read_text()), path.name


def test_long_normal_paragraph_not_flagged():
    sentences = [
        f"Sample {i} was measured at {20 + i % 7} degrees and showed a drift of {i * 0.13:.2f} units over the run."
        for i in range(200)
    ]
    text = '<div data-label="Text"><p>' + " ".join(sentences)
    assert len(text) > 15000
    assert not is_repetition_loop(text)


def test_genuine_table_of_distinct_rows_not_flagged():
    rows = "".join(f"<tr><td>Item {i}</td><td>{i * 17 % 101}</td><td>ok</td></tr>" for i in range(30))
    assert not is_repetition_loop(HEAD + rows)
    assert not is_repetition_loop(HEAD + rows + "</table></div>")


def test_few_repeats_or_short_text_not_flagged():
    assert not is_repetition_loop("ha " * 5)
    assert not is_repetition_loop("<p>Thank you. Thank you. Thank you.</p>")
    assert not is_repetition_loop("." * 100)  # a short dotted leader is not a loop
    assert not is_repetition_loop(" " * 5000)  # whitespace is not a loop


@pytest.mark.parametrize("value", ["", None, 5, "\x00" * 10])
def test_any_input(value):
    assert not is_repetition_loop(value)  # type: ignore[arg-type]
