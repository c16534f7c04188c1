"""`ocrserve mcp`: a Model Context Protocol server (the `mcp` extra, the official SDK) over stdio or
streamable HTTP, so LLM agents and desktop assistants convert documents with ocrserve. The protocol
is server.py's; what it converts, from where, within which limits: documents.py."""
