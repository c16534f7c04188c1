"""The searchable PDF's pages without the source's active content.

The output is a new PDF that holds the source's pages (pdfium's page import), so nothing of the
source's catalog comes along: its document JavaScript, open action, document actions, embedded files
and interactive form (AcroForm, XFA) are gone (and so are its outline, metadata and page labels, which
live there too). On each page, an annotation that acts is removed: file attachments, sound, movie,
screen, rich media and 3D annotations, form widgets (a page that has them is flattened first, so
their values stay visible, as the page renderer shows them to the model), and any annotation with
additional actions or an action other than a go-to or a web link (Launch, JavaScript, SubmitForm,
...). A page with its own open or close actions, which pdfium cannot remove from a page, is carried
as a form XObject on a fresh page of its displayed size (its links are lost, its content drawn as
before). Call under the pdfium lock.
"""

from __future__ import annotations

_ACTIVE_SUBTYPES = ("FILEATTACHMENT", "SOUND", "MOVIE", "SCREEN", "THREED", "RICHMEDIA", "WIDGET", "XFAWIDGET")


def _active_annot(annot) -> bool:
    import pypdfium2.raw as pdfium_c

    subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
    if subtype in {getattr(pdfium_c, f"FPDF_ANNOT_{s}", -1) for s in _ACTIVE_SUBTYPES}:
        return True
    if pdfium_c.FPDFAnnot_HasKey(annot, b"AA"):
        return True
    if not pdfium_c.FPDFAnnot_HasKey(annot, b"A"):
        return False
    link = pdfium_c.FPDFAnnot_GetLink(annot) if subtype == pdfium_c.FPDF_ANNOT_LINK else None
    action = pdfium_c.FPDFLink_GetAction(link) if link else None
    return not action or pdfium_c.FPDFAction_GetType(action) not in (pdfium_c.PDFACTION_GOTO, pdfium_c.PDFACTION_URI)


def _strip_annots(page) -> int:
    """Remove the page's annotations that act; returns how many."""
    import pypdfium2.raw as pdfium_c

    removed = 0
    for i in reversed(range(pdfium_c.FPDFPage_GetAnnotCount(page.raw))):
        annot = pdfium_c.FPDFPage_GetAnnot(page.raw, i)
        if not annot:
            continue
        try:
            active = _active_annot(annot)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
        if active and pdfium_c.FPDFPage_RemoveAnnot(page.raw, i):
            removed += 1
    return removed


def _has_widgets(page) -> bool:
    import pypdfium2.raw as pdfium_c

    for i in range(pdfium_c.FPDFPage_GetAnnotCount(page.raw)):
        annot = pdfium_c.FPDFPage_GetAnnot(page.raw, i)
        if annot:
            subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
            pdfium_c.FPDFPage_CloseAnnot(annot)
            if subtype in (pdfium_c.FPDF_ANNOT_WIDGET, pdfium_c.FPDF_ANNOT_XFAWIDGET):
                return True
    return False


def _page_actions(page) -> bool:
    import pypdfium2.raw as pdfium_c

    return any(
        pdfium_c.FPDF_GetPageAAction(page.raw, kind)
        for kind in (pdfium_c.FPDFPAGE_AACTION_OPEN, pdfium_c.FPDFPAGE_AACTION_CLOSE)
    )


def _as_xobject(new, src, index: int) -> None:
    """Put source page `index` on a fresh page of `new` (at `index`) as one form XObject."""
    import pypdfium2.raw as pdfium_c

    width, height = src[index].get_size()  # displayed: pdfium's XObject carries the page's rotation
    xobject = pdfium_c.FPDF_NewXObjectFromPage(new.raw, src.raw, index)
    if not xobject:
        raise RuntimeError("pdfium could not copy a page")
    try:
        page = new.new_page(width, height, index=index)
        form = pdfium_c.FPDF_NewFormObjectFromXObject(xobject)
        pdfium_c.FPDFPage_InsertObject(page.raw, form)
        page.gen_content()
        page.close()
    finally:
        pdfium_c.FPDF_CloseXObject(xobject)


def inert_copy(src):
    """A new pdfium document with `src`'s pages and none of its active content (the module's rule).
    `src` is changed in memory (its pages flattened and stripped first): close it afterwards."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    acting: list[int] = []
    for i in range(len(src)):
        page = src[i]
        if _has_widgets(page):  # their values stay on the page, drawn
            pdfium_c.FPDFPage_Flatten(page.raw, pdfium_c.FLAT_NORMALDISPLAY)
        _strip_annots(page)  # before the import, which copies only what the pages still refer to
        if _page_actions(page):
            acting.append(i)
        page.close()
    new = pdfium.PdfDocument.new()
    plain = [i for i in range(len(src)) if i not in acting]
    if plain:
        new.import_pages(src, plain)  # in one go: resources the pages share are copied once
    for i in acting:  # in increasing order: the pages before each are in place
        _as_xobject(new, src, i)
    return new
