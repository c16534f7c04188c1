"""Chunks for retrieval on a generated two-page document: headings, a long table with its caption,
a formula, a figure with its caption, a list, a long paragraph, page furniture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from ocrserve import Document, Source, parse_output
from ocrserve.render.chunk_model import Chunk, chunk_json_schema
from ocrserve.render.chunks import chunk_document, embedding_text, estimate_tokens, render_chunks_jsonl

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "ocrserve" / "schemas" / "chunk.schema.json"
LIMIT = 120

SENTENCE = "Rainfall in the northern valleys rose sharply during the second half of the season."
ROWS = "".join(f"<tr><td>Region {i}</td><td>{i * 7}</td><td>{i * 3}.5</td></tr>" for i in range(40))


def _div(box, label, html):
    return f'<div data-bbox="{box}" data-label="{label}">{html}</div>'


FORMULA = '<math display="block">\\bar{r} = \\frac{1}{n}\\sum_{i=1}^{n} r_i</math>'
TABLE = f"<table><tr><th>Region</th><th>Days</th><th>mm</th></tr>{ROWS}</table>"
FINDINGS = "".join(
    f"<li>Finding {i}: the stations in group {i} agree within two percent of each other.</li>" for i in range(8)
)
LONG_TEXT = "<p>" + " ".join(f"{SENTENCE[:-1]} in year {i}." for i in range(12)) + "</p>"

# the document's blocks: (page, box, label, html)
BLOCKS = [
    (1, "[80, 40, 900, 80]", "Page-Header", "<p>ACME Annual Report 2025</p>"),
    (1, "[80, 100, 900, 150]", "Section-Header", "<h1>Annual report</h1>"),
    (1, "[80, 160, 900, 200]", "Text", "<p>This report covers the year.</p>"),
    (1, "[80, 210, 900, 240]", "Section-Header", "<h2>Methods</h2>"),
    (1, "[80, 250, 900, 280]", "Text", "<p>We measured rain at twelve stations.</p>"),
    (1, "[80, 290, 900, 320]", "Text", "<p>Each station reported daily.</p>"),
    (1, "[80, 330, 900, 380]", "Equation-Block", FORMULA),
    (1, "[80, 390, 900, 410]", "Caption", "<p>Table 1: Rainfall by region</p>"),
    (1, "[80, 420, 900, 980]", "Table", TABLE),
    (2, "[80, 60, 900, 100]", "Section-Header", "<h2>Discussion</h2>"),
    (2, "[80, 110, 600, 400]", "Image", '<img alt="A map of the stations"/>'),
    (2, "[80, 410, 600, 430]", "Caption", "<p>Figure 1: Station map</p>"),
    (2, "[80, 440, 900, 560]", "List-Group", f"<ul>{FINDINGS}</ul>"),
    (2, "[80, 570, 900, 800]", "Text", LONG_TEXT),
    (2, "[80, 810, 900, 840]", "Section-Header", "<h3>Limits</h3>"),
    (2, "[80, 850, 900, 880]", "Text", "<p>Two stations were offline in May.</p>"),
    (2, "[80, 960, 900, 990]", "Page-Footer", "<p>Page 2</p>"),
]
PAGE1, PAGE2 = ("".join(_div(box, label, html) for p, box, label, html in BLOCKS if p == n) for n in (1, 2))


@pytest.fixture
def doc() -> Document:
    pages = [parse_output(raw, "chandra-1", (612, 792), index=i) for i, raw in enumerate([PAGE1, PAGE2])]
    return Document(source=Source(path="/data/report.pdf", sha256="ab" * 32, type="pdf", page_count=2), pages=pages)


def _blocks(doc):
    return {(p.index + 1, b.index): b for p in doc.pages for b in p.blocks}


def _owners(chunks):
    owners: dict[tuple[int, int], list[int]] = {}
    for c in chunks:
        for r in c.blocks:
            owners.setdefault((r.page, r.index), []).append(c.index)
    return owners


def _by_label(doc, label):
    return [((p.index + 1, b.index), b) for p in doc.pages for b in p.blocks if b.label == label]


def test_boundaries_headings_captions_and_limits(doc):
    chunks = chunk_document(doc, max_tokens=LIMIT)
    blocks, owners = _blocks(doc), _owners(chunks)
    texts = {c.index: c.text for c in chunks}

    # page furniture is left out; every other block is in a chunk
    furniture = {k for k, b in blocks.items() if b.label in ("Page-Header", "Page-Footer")}
    assert set(owners) == set(blocks) - furniture
    # every block is in exactly one chunk, except the list and the long paragraph, split into consecutive chunks
    [(list_key, lst)] = _by_label(doc, "List-Group")
    long_key = max((k for k, b in blocks.items() if b.label == "Text"), key=lambda k: len(blocks[k].text))
    for key, where in owners.items():
        if key in (list_key, long_key):
            assert len(where) > 1 and where == list(range(where[0], where[0] + len(where)))
        else:
            assert len(where) == 1, (blocks[key].label, where)
            assert blocks[key].markdown.strip() in texts[where[0]]
    # a split block's pieces, in order across its chunks, are its whole text
    for key in (list_key, long_key):
        joined = " ".join(texts[i] for i in owners[key])
        assert re.sub(r"\s+", " ", blocks[key].markdown) in re.sub(r"\s+", " ", joined)
        assert not any(blocks[key].markdown.strip() in texts[i] for i in owners[key])
    # no list item is cut: each item is whole in one chunk
    for item in re.findall(r"^- .*$", lst.markdown, re.M):
        assert sum(item in texts[i] for i in owners[list_key]) == 1

    # the table is whole, with its caption, and is the only chunk over the limit
    [(table_key, table)] = _by_label(doc, "Table")
    [table_chunk] = [c for c in chunks if any(r.label == "Table" for r in c.blocks)]
    assert table.markdown.strip() in table_chunk.text and table_chunk.text.startswith("Table 1: Rainfall by region")
    assert [r.label for r in table_chunk.blocks] == ["Caption", "Table"]
    assert table_chunk.tokens > LIMIT
    assert all(c.tokens <= LIMIT for c in chunks if c is not table_chunk)
    assert all(c.tokens == estimate_tokens(c.text) for c in chunks)
    # the formula is whole
    [(_, eq)] = _by_label(doc, "Equation-Block")
    assert sum(eq.markdown.strip() in c.text for c in chunks) == 1
    # the figure's caption is with the figure
    [fig_chunk] = [c for c in chunks if "Image" in c.labels]
    refs = [r.label for r in fig_chunk.blocks]
    assert "A map of the stations\n\nFigure 1: Station map" in fig_chunk.text
    assert refs[refs.index("Image") + 1] == "Caption"

    # heading paths; small neighbours under one heading merged; a lone h1 joins its first section
    first = chunks[0]
    assert first.text.startswith("# Annual report\n\nThis report covers the year.")
    methods = [c for c in chunks if c.headings == ["Annual report", "Methods"]]
    assert methods and "We measured rain" in methods[0].text and "Each station reported daily." in methods[0].text
    assert methods[0].text.startswith("## Methods")
    assert all(c.headings == ["Annual report", "Discussion"] for c in chunks if "Finding 3" in c.text)
    [limits] = [c for c in chunks if "offline in May" in c.text]
    assert limits.headings == ["Annual report", "Discussion", "Limits"] and limits.text.startswith("### Limits")
    assert embedding_text(limits).startswith("Annual report > Discussion > Limits\n\n")

    # citation data: 1-based pages, boxes, ids
    assert table_chunk.pages == [1] and limits.pages == [2]
    assert table_chunk.blocks[1].bbox_norm == table.bbox_norm and table_chunk.blocks[1].bbox == table.bbox
    assert [c.id for c in chunks] == [f"abababababab-{i:04d}" for i in range(len(chunks))]


def test_jsonl_matches_the_published_schema(doc):
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == chunk_json_schema()
    lines = render_chunks_jsonl(doc, max_tokens=LIMIT).splitlines()
    assert len(lines) == len(chunk_document(doc, max_tokens=LIMIT))
    schema = chunk_json_schema()
    for line in lines:
        data = json.loads(line)
        jsonschema.validate(data, schema)
        assert Chunk.model_validate(data).text == data["text"]


def test_a_real_tokenizer_sets_the_limit(doc, tmp_path):
    words = lambda text: len(text.split())  # noqa: E731
    chunks = chunk_document(doc, max_tokens=40, tokenizer=words)
    assert all(c.tokens == words(c.text) for c in chunks)
    assert all(c.tokens <= 40 for c in chunks if "Table" not in c.labels and "Equation-Block" not in c.labels)

    # a Hugging Face tokenizer from a folder (built here: nothing is downloaded)
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # words and punctuation runs
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(tmp_path / "tok")
    hf = chunk_document(doc, max_tokens=60, tokenizer=str(tmp_path / "tok"))
    count = lambda text: len(tok.pre_tokenizer.pre_tokenize_str(text))  # noqa: E731
    assert all(c.tokens == count(c.text) for c in hf)
    assert all(c.tokens <= 60 for c in hf if "Table" not in c.labels)
    assert len(hf) != len(chunks)


def test_bad_options_are_clear_errors(doc, tmp_path):
    with pytest.raises(ValueError, match="max_tokens=0"):
        chunk_document(doc, max_tokens=0)
    with pytest.raises(ValueError, match="missing-tok.*cannot be loaded"):
        chunk_document(doc, tokenizer=str(tmp_path / "missing-tok"))
    with pytest.raises(ValueError, match="tokenizer 3"):
        chunk_document(doc, tokenizer=3)  # type: ignore[arg-type]


def test_estimate():
    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("\u6f22\u5b57\u6f22") == 3
