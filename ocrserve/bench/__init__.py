"""`ocrserve bench`: pages/s, latency, time to first block, client CPU and GPU memory against a live server."""
