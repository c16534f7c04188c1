"""Reading PDFs, in one place for everything that reads them: the renderer (ingest/raster.py), the lite
engine's text layer, and the searchable PDF.

- `document.open_pdf`: a worker process's open documents (kept for the pages that follow, closed before
  pypdfium2's exit hook), the reasons a PDF cannot be opened as DocumentError, and `PDFIUM_LOCK`
  for in-process use (pdfium must not run on two threads of a process at once);
- `chars`: the characters of a page's text layer and the line fragments they make;
- `textlayer`: a page's lines and whether its text layer can be trusted (`analyze_page`);
- `accents`: detached accents composed with their letters.
"""
