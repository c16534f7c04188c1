"""`ocrserve serve`: memory plan, vLLM command lines, supervision of the replicas."""
