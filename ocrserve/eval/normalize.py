"""Text normalization of olmOCR-Bench, applied to both the test strings and the candidate Markdown.

Same steps, in the same order, as olmOCR-Bench (allenai/olmocr, Apache-2.0):
1. ``<br>`` / ``<br/>`` become a space;
2. Markdown emphasis is dropped: ``**x**`` and ``__x__`` (bold), ``<b>``/``<i>`` tags, then single
   ``*x*`` / ``_x_`` pairs on one line (so ``a_b_c`` becomes ``abc``: that is the benchmark's rule);
3. every whitespace run becomes one space;
4. Unicode NFC;
5. typographic quotes, dashes, the minus sign, the full-width low line and the micro sign are
   mapped to ASCII quotes, ``-``, ``_`` and Greek mu.
"""

from __future__ import annotations

import re
import unicodedata

_BR = re.compile(r"<br/?>")
_EMPHASIS = [
    (re.compile(r"\*\*(.*?)\*\*"), r"\1"),
    (re.compile(r"__(.*?)__"), r"\1"),
    (re.compile(r"</?b>"), ""),
    (re.compile(r"</?i>"), ""),
    (re.compile(r"(\*\*|__)(.*?)\1"), r"\2"),
    (re.compile(r"(\*|_)(.*?)\1"), r"\2"),
]
_SPACES = re.compile(r"\s+")

#: fancy character -> its plain equivalent
CHAR_MAP: dict[str, str] = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\uff3f": "_",
    "\u2013": "-",
    "\u2014": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2212": "-",
    "\u00b5": "\u03bc",
}
_TRANSLATE = str.maketrans(CHAR_MAP)


def normalize_text(text: str) -> str:
    """Normalize Markdown or a test string the way olmOCR-Bench does before comparing."""
    text = _BR.sub(" ", text)
    for pattern, repl in _EMPHASIS:
        text = pattern.sub(repl, text)
    text = _SPACES.sub(" ", text)
    text = unicodedata.normalize("NFC", text)
    return text.translate(_TRANSLATE)
