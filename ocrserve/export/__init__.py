"""Exports that need more than the Document: the searchable PDF (the source pages with a text layer),
and render_format, the one entry point for every output format (files and HTTP)."""
