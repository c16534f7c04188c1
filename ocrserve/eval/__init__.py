"""olmOCR-Bench compatible scoring of Markdown outputs (`ocrserve eval`)."""
