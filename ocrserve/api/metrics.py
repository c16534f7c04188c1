"""Prometheus metrics of the OCR service (one registry per app, served at /metrics)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)


class Metrics:
    def __init__(self, queue_depth: Callable[[], float], jobs_running: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pages = Counter(
            "ocrserve_pages",
            "Pages converted, by final status (ok, fallback, failed; cancelled: "
            "the conversion stopped first, e.g. its client went away).",
            ["status"],
            registry=r,
        )
        self.page_latency = Histogram(
            "ocrserve_page_latency_seconds",
            "Engine time per page, request sent to answer complete.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.first_block = Histogram(
            "ocrserve_time_to_first_block_seconds",
            "Streaming: page sent to the engine until its first block closed.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.documents = Counter("ocrserve_documents", "Documents converted, by status.", ["status"], registry=r)
        self.failures = Counter(
            "ocrserve_failures",
            "Failures, by kind (page, document, job, internal; store: a job store call that failed, tried again).",
            ["kind"],
            registry=r,
        )
        self.rejected = Counter(
            "ocrserve_requests_rejected",
            "Requests refused, by reason (unauthorized, too_large, too_many, bad_input; slow_reader: a stream's "
            "client dropped for not reading).",
            ["reason"],
            registry=r,
        )
        self.queue_depth = Gauge("ocrserve_queue_depth", "Jobs waiting in the queue.", registry=r)
        self.queue_depth.set_function(queue_depth)
        self.jobs_running = Gauge("ocrserve_jobs_running", "Jobs being converted now.", registry=r)
        self.jobs_running.set_function(jobs_running)
        self.sweeps = Counter(
            "ocrserve_job_sweeps", "Sweeps for expired jobs run (at startup and periodically).", registry=r
        )
        self.jobs_expired = Counter(
            "ocrserve_jobs_expired", "Finished jobs removed after their retention time.", registry=r
        )
        self.in_flight = Gauge("ocrserve_pages_in_flight", "Pages at the engine now.", registry=r)
