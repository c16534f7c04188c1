"""Build the sample document: a born-digital PDF with headings, two columns, a table and a list.

    python -m tests.support.sample [OUT.pdf]       (default: ocrserve/samples/sample.pdf)
    python -m tests.support.sample --encrypted     (ocrserve/samples/sample-encrypted.pdf, password "secret")

Needs reportlab (in the `test` extra). The lite engine's tests build the same document in a
temporary folder with `build_sample_pdf`; `SAMPLE_TEXT` holds the strings they look for.
"""

from __future__ import annotations

import sys
from pathlib import Path

TITLE = "Field Notes on River Deltas"
INTRO = (
    "This short report describes how sediment moves through a river delta and how engineers "
    "measure it. It is a sample document for testing document conversion."
)
H_METHODS = "Measurement Methods"
LEFT = [
    "Sediment samples were taken at twelve stations along the main channel during the spring flood. "
    "Each sample was dried, weighed and sieved into five size classes before analysis.",
    "The left bank stations showed coarse sand near the surface and fine silt below one metre of "
    "depth, which suggests a recent change in the flow of the river.",
]
RIGHT = [
    "Water velocity was recorded with an acoustic current meter mounted on a small boat. The boat "
    "crossed the channel at each station three times to average out local turbulence.",
    "Readings from the right bank were slower than expected because a sand bar had formed during "
    "the winter months and deflected the current toward the opposite shore.",
]
H_RESULTS = "Results by Station"
TABLE = [
    ["Station", "Depth (m)", "Velocity (m/s)", "Silt (%)"],
    ["North", "2.4", "1.35", "18"],
    ["Central", "3.1", "1.62", "11"],
    ["South", "1.8", "0.94", "27"],
]
H_NEXT = "Next Steps"
LIST = [
    "Repeat the survey after the autumn rains.",
    "Install two permanent gauges near the sand bar.",
    "Share the cleaned data with the regional water board.",
]
OUTRO_LEFT = (
    "Longer records will show whether the sand bar is permanent. Seasonal surveys cost little and "
    "give the most useful comparison from one year to the next."
)
OUTRO_RIGHT = (
    "Local fishermen reported that the channel had narrowed, which agrees with our soundings near "
    "the southern station and with older maps of the coast."
)
HEADER = "Delta Survey Report"

SAMPLE_TEXT = {
    "title": TITLE,
    "intro": INTRO,
    "h_methods": H_METHODS,
    "left": LEFT,
    "right": RIGHT,
    "h_results": H_RESULTS,
    "table": TABLE,
    "h_next": H_NEXT,
    "list": LIST,
    "outro_left": OUTRO_LEFT,
    "outro_right": OUTRO_RIGHT,
    "header": HEADER,
}


ENCRYPTED_PASSWORD = "secret"


def build_sample_pdf(
    path: str | Path, *, pagesize: tuple[float, float] | None = None, password: str | None = None
) -> Path:
    """Write the two-page sample PDF to `path` (A5 by default), encrypted when a password is given."""
    from reportlab.lib import colors, pdfencrypt
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import (
        BaseDocTemplate,
        Frame,
        FrameBreak,
        ListFlowable,
        ListItem,
        NextPageTemplate,
        PageTemplate,
        Paragraph,
        Spacer,
        Table,
        TableStyle,
    )

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    W, H = pagesize or A5
    m, gutter = 36.0, 18.0
    colw = (W - 2 * m - gutter) / 2
    body = ParagraphStyle("body", fontName="Helvetica", fontSize=9, leading=11.5, spaceAfter=6)
    h1 = ParagraphStyle("h1", fontName="Helvetica-Bold", fontSize=18, leading=22, spaceAfter=8)
    h2 = ParagraphStyle("h2", fontName="Helvetica-Bold", fontSize=13, leading=16, spaceAfter=6, spaceBefore=4)

    def decorate(canvas, doc):
        canvas.saveState()
        canvas.setFont("Helvetica", 7)
        canvas.drawString(m, H - 22, HEADER)
        canvas.drawCentredString(W / 2, 20, f"Page {doc.page}")
        canvas.restoreState()

    top_h = 120.0
    cols_h = 250.0
    first = [
        Frame(m, H - m - top_h, W - 2 * m, top_h, id="top", showBoundary=0),
        Frame(m, H - m - top_h - cols_h, colw, cols_h, id="left"),
        Frame(m + colw + gutter, H - m - top_h - cols_h, colw, cols_h, id="right"),
        Frame(m, m, W - 2 * m, H - 2 * m - top_h - cols_h, id="bottom"),
    ]
    second = [
        Frame(m, H - m - 270, W - 2 * m, 270, id="top2"),
        Frame(m, m, colw, H - 2 * m - 270, id="left2"),
        Frame(m + colw + gutter, m, colw, H - 2 * m - 270, id="right2"),
    ]
    doc = BaseDocTemplate(
        str(path),
        pagesize=(W, H),
        leftMargin=m,
        rightMargin=m,
        topMargin=m,
        bottomMargin=m,
        title=TITLE,
        author="ocrserve",
        encrypt=pdfencrypt.StandardEncryption(password, canPrint=1) if password else None,
    )
    doc.addPageTemplates(
        [PageTemplate("first", first, onPage=decorate), PageTemplate("second", second, onPage=decorate)]
    )
    table = Table(TABLE, colWidths=[(W - 2 * m) / 4] * 4)
    table.setStyle(
        TableStyle(
            [
                ("FONT", (0, 0), (-1, 0), "Helvetica-Bold", 9),
                ("FONT", (0, 1), (-1, -1), "Helvetica", 9),
                ("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.black),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
            ]
        )
    )
    story = [
        Paragraph(TITLE, h1),
        Paragraph(INTRO, body),
        Paragraph(H_METHODS, h2),
        FrameBreak(),
        *[Paragraph(t, body) for t in LEFT],
        FrameBreak(),
        *[Paragraph(t, body) for t in RIGHT],
        FrameBreak(),
        Spacer(1, 4),
        Paragraph("Station readings are summarised on the next page.", body),
        NextPageTemplate("second"),
        FrameBreak(),
        Paragraph(H_RESULTS, h2),
        table,
        Spacer(1, 10),
        Paragraph(H_NEXT, h2),
        ListFlowable(
            [ListItem(Paragraph(t, body), leftIndent=12) for t in LIST],
            bulletType="bullet",
            start="\u2022",
            leftIndent=12,
            bulletFontSize=9,
        ),
        FrameBreak(),
        Paragraph(OUTRO_LEFT, body),
        FrameBreak(),
        Paragraph(OUTRO_RIGHT, body),
    ]
    doc.build(story)
    return path


def main(argv: list[str]) -> int:
    samples = Path(__file__).resolve().parents[2] / "ocrserve" / "samples"
    if argv[1:] == ["--encrypted"]:  # for the README's password example
        out = build_sample_pdf(samples / "sample-encrypted.pdf", password=ENCRYPTED_PASSWORD)
        print(f"wrote {out} ({out.stat().st_size} bytes, password {ENCRYPTED_PASSWORD!r})")
        return 0
    out = Path(argv[1]) if len(argv) > 1 else samples / "sample.pdf"
    build_sample_pdf(out)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
