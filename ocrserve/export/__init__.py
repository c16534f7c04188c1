"""The output formats' registry (formats.py: one record per format, and render_format, the one entry
point for every format, files and HTTP) and the exports that need more than the Document: the
searchable PDF (the source pages with a text layer)."""
