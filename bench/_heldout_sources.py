"""The held-out documents of bench.heldout (issue #30): public documents lite was never tuned on.

This machine reaches package registries only, so the default list takes real-world PDFs that Debian
packages ship (TeX Live's documentation: Arabic and Persian manuals and books, Korean manuals,
English user guides and publishers' two-column samples) and public data sets from a PyPI wheel
(vega_datasets) for table images. `url:` records work where the internet is reachable. Each record:
kind (rtl, headings, columns), fetch (url:URL, apt:PACKAGE:PATH, pip:PACKAGE:PATH), pages (0-based).
"""

from __future__ import annotations

_AR = "apt:texlive-lang-arabic:/usr/share/doc/texlive-doc/"
_KO = "apt:texlive-lang-korean:/usr/share/doc/texlive-doc/latex/"
_BASE = "apt:texlive-latex-base-doc:/usr/share/doc/texlive-doc/"
_PUB = "apt:texlive-publishers-doc:/usr/share/doc/texlive-doc/latex/"

SOURCES: list[dict] = [
    # right-to-left text layers (Arabic, Persian): pages that are mostly Arabic script
    {"kind": "rtl", "fetch": _AR + "fonts/dad/dad-user-guide.pdf", "pages": [4, 6]},
    {"kind": "rtl", "fetch": _AR + "latex/hvarabic/hvarabic.pdf", "pages": [0, 2]},
    {"kind": "rtl", "fetch": _AR + "latex/lshort-persian/lshort.pdf", "pages": [7, 9]},
    {"kind": "rtl", "fetch": _AR + "latex/quran/quran-doc.pdf", "pages": [4, 6]},
    {"kind": "rtl", "fetch": _AR + "latex/quran/quran-test2.pdf", "pages": [0]},
    {"kind": "rtl", "fetch": _AR + "lualatex/arabluatex/samples/al-Jahiz.pdf", "pages": [0]},
    {"kind": "rtl", "fetch": _AR + "xelatex/arabic-book/arabic-book.pdf", "pages": [4]},
    {"kind": "rtl", "fetch": _AR + "xelatex/na-box/na-box_doc-back.pdf", "pages": [1, 3]},
    {"kind": "rtl", "fetch": _AR + "xelatex/sexam/exam_with_sexam_ar-DZ.pdf", "pages": [0]},
    {"kind": "rtl", "fetch": _AR + "xelatex/sexam/sexam_wexam_doc_ar.pdf", "pages": [0]},
    # born-digital reports and guides with an outline (bookmarks): headings
    {"kind": "headings", "fetch": _BASE + "latex/hyperref/hyperref-doc.pdf", "pages": [3, 5, 6, 7]},
    {
        "kind": "headings",
        "fetch": _BASE + "latex/firstaid/latex2e-first-aid-for-external-files.pdf",
        "pages": [1, 2, 3],
    },
    {"kind": "headings", "fetch": _BASE + "bibtex/babelbib/babelbib.pdf", "pages": [2, 3, 4]},
    {"kind": "headings", "fetch": _BASE + "latex/base/usrguide.pdf", "pages": [1, 3, 4]},
    {"kind": "headings", "fetch": _BASE + "latex/base/clsguide.pdf", "pages": [1, 2, 3]},
    {"kind": "headings", "fetch": _PUB + "acmart/acmguide.pdf", "pages": [1, 4, 5]},
    {"kind": "headings", "fetch": _PUB + "acmart/samples/sample-acmsmall.pdf", "pages": [1, 2, 3]},
    {"kind": "headings", "fetch": _KO + "kotex-utf/kotex-doc.pdf", "pages": [6, 7, 8]},
    {"kind": "headings", "fetch": _KO + "pmhanguljamo/pmhanguljamo-doc.pdf", "pages": [1, 2, 4]},
    {"kind": "headings", "fetch": _KO + "cjk-ko/cjk-ko-doc.pdf", "pages": [1, 2, 3]},
    # two-column papers, scanned here (rasterised with noise and skew): reading order
    {"kind": "columns", "fetch": _PUB + "acmart/samples/sample-sigconf.pdf", "pages": [1, 2, 3]},
    {"kind": "columns", "fetch": _PUB + "acmart/samples/sample-sigplan.pdf", "pages": [1, 2]},
    {"kind": "columns", "fetch": _PUB + "revtex4-1/sample/aps/apssamp.pdf", "pages": [1, 2]},
    {"kind": "columns", "fetch": _PUB + "revtex4-1/sample/aip/aipsamp.pdf", "pages": [0, 1]},
]

# public data sets made into table images: (file in the vega_datasets wheel, columns, rows)
TABLE_DATASETS: list[tuple[str, list[str], int]] = [
    ("stocks.csv", ["symbol", "date", "price"], 14),
    ("iowa-electricity.csv", ["year", "source", "net_generation"], 12),
    ("seattle-weather.csv", ["date", "precipitation", "temp_max", "temp_min", "wind", "weather"], 12),
    ("us-employment.csv", ["month", "nonfarm", "private", "goods_producing", "construction", "manufacturing"], 10),
    ("cars.json", ["Name", "Miles_per_Gallon", "Cylinders", "Horsepower", "Year"], 12),
    ("barley.json", ["yield", "variety", "year", "site"], 12),
    ("burtin.json", ["Bacteria", "Penicillin", "Streptomycin", "Neomycin", "Gram_Staining"], 16),
    ("driving.json", ["side", "year", "miles", "gas"], 12),
    ("crimea.json", ["date", "wounds", "other", "disease"], 12),
    ("wheat.json", ["year", "wheat", "wages"], 14),
    ("la-riots.csv", ["first_name", "last_name", "age", "gender", "race"], 10),
    ("anscombe.json", ["Series", "X", "Y"], 14),
    ("iris.json", ["sepalLength", "sepalWidth", "petalLength", "petalWidth", "species"], 12),
    ("ohlc.json", ["date", "open", "high", "low", "close"], 12),
    ("sf-temps.csv", ["temp", "date"], 12),
    ("airports.csv", ["iata", "name", "city", "state", "country"], 10),
]
