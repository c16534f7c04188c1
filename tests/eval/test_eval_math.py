"""Math tests: glyph-layout comparison on synthetic layouts, and real KaTeX rendering in Chromium.

The rendering tests need Debian's `chromium` (CI installs it); without it they fail on purpose,
so that math scoring is never silently untested.
"""

from __future__ import annotations

import pytest

from ocrserve.eval.mathrender import ChromiumKatex, Glyph, Rendered, find_browser, same_rendering
from ocrserve.eval.tests import parse_test

_ids = iter(range(10**6))


def R(*glyphs, mathml=None):
    # a distinct MathML per rendering, so only the glyph layouts can make two renderings match
    return Rendered(mathml=mathml or f"<math>{next(_ids)}</math>", glyphs=tuple(Glyph(*g) for g in glyphs))


def test_glyph_embedding_and_neighbour_tolerance():
    # "a" left of "b" on one line (centres 0.0 apart vertically)
    ref = R(("a", 0, 0, 10, 10), ("b", 20, 0, 10, 10))
    assert same_rendering(ref, R(("a", 100, 50, 10, 10), ("b", 120, 50, 10, 10), ("c", 140, 50, 10, 10)))
    # b raised by 4.9 px: still b's left neighbour is a (within the 5 px tolerance)
    assert same_rendering(ref, R(("a", 0, 0, 10, 10), ("b", 20, -4.9, 10, 10)))
    # b raised by 5.1 px: a has no right neighbour in the candidate -> no match
    assert not same_rendering(ref, R(("a", 0, 0, 10, 10), ("b", 20, -5.1, 10, 10)))
    # order swapped: b left of a
    assert not same_rendering(ref, R(("b", 0, 0, 10, 10), ("a", 20, 0, 10, 10)))
    # a missing character never matches
    assert not same_rendering(ref, R(("a", 0, 0, 10, 10)))


def test_multi_char_spans_are_split_and_zero_width_dropped():
    ref = R(("ab", 0, 0, 20, 10))
    assert same_rendering(ref, R(("a", 0, 0, 10, 10), ("\u200b", 12, 0, 1, 10), ("b", 10, 0, 10, 10)))
    assert not same_rendering(ref, R(("a", 0, 0, 10, 10), ("b", 0, 20, 10, 10)))  # b under a


def test_mathml_containment_shortcut():
    ref = R(
        mathml="<math><semantics><mrow><mi>x</mi></mrow><annotation encoding='tex'>x</annotation></semantics></math>"
    )
    hyp = R(
        mathml="<math><semantics><mrow> <mi>y</mi><mrow><mi>x</mi></mrow></mrow><annotation encoding='tex'>zz</annotation></semantics></math>"
    )
    assert same_rendering(ref, hyp)


@pytest.fixture(scope="module")
def katex():
    if find_browser() is None:
        pytest.fail("math tests need a Chromium browser: apt-get install -y chromium")
    r = ChromiumKatex()
    assert r.available, r.reason
    r.render_many(FORMULAS)  # one browser run for the whole module
    return r


FORMULAS = [
    r"\frac{a}{b}",
    r"\undefinedmacro{x",
    r"a^{2}+b^{2}=c^{2}",
    r"a^2 + b^2 = c^2",
    r"a^2 + b^2 = c^3",
    r"\sin x",
    r"\operatorname{sin} x",
    r"a/b",
    r"\frac{b}{a}",
]


def mk(math, **kw):
    return parse_test({"pdf": "a.pdf", "page": 1, "id": "m", "type": "math", "math": math, **kw})


def test_katex_renders_and_reports_errors(katex):
    katex.render_many([r"\frac{a}{b}", r"\undefinedmacro{x"])
    ok = katex.render(r"\frac{a}{b}")
    assert ok.ok and "<mfrac>" in ok.mathml and {g.text for g in ok.glyphs} >= {"a", "b"}
    a = next(g for g in ok.glyphs if g.text == "a")
    b = next(g for g in ok.glyphs if g.text == "b")
    assert a.cy < b.cy  # numerator above denominator
    bad = katex.render(r"\undefinedmacro{x")
    assert not bad.ok and bad.error


def test_math_test_with_rendering(katex):
    t = mk(r"a^{2}+b^{2}=c^{2}")
    assert t.run(r"Pythagoras: $$a^{2}+b^{2}=c^{2}$$", katex).passed is True  # identical
    assert t.run(r"Pythagoras: \[ a^2 + b^2 = c^2 \]", katex).passed is True  # same rendering
    assert t.run(r"Pythagoras: \( a^2 + b^2 = c^3 \)", katex).passed is False  # near miss
    assert t.run("no formulas at all", katex).passed is False
    sin = mk(r"\sin x")
    assert sin.run(r"$\operatorname{sin} x$", katex).passed is True  # glyph layout match
    frac = mk(r"\frac{a}{b}")
    assert frac.run(r"$a/b$", katex).passed is False
    assert frac.run(r"$\frac{b}{a}$", katex).passed is False
    assert mk(r"\frac{a}{b}", ignore_dollar_delimited=True).run(r"$\frac{a}{b}$", katex).passed is False


def test_reference_that_does_not_render_is_skipped(katex):
    out = mk(r"\undefinedmacro{x").run(r"$\undefinedmacro{x$", katex)
    assert out.passed is None and "does not render" in out.explanation
