"""Prometheus metrics shared by the layers that observe something.

Counters and histograms live here (neither SQL nor HTTP), so the matching services can
count cache hits and the API can time requests without importing each other. Gauges that
describe the database (jobs by state, booked slots) are computed at scrape time.

With several uvicorn worker processes each process has its own registry; set
PROMETHEUS_MULTIPROC_DIR as prometheus-client documents to aggregate them.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUEST_LATENCY = Histogram(
    "jobmatch_http_request_duration_seconds",
    "HTTP request latency by method, route template and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
DISPATCH_LATENCY = Histogram(
    "jobmatch_dispatch_duration_seconds",
    "Time to choose and book a job for a pulling worker.",
    ["outcome"],
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
)
CATEGORY_LOOKUPS = Counter(
    "jobmatch_category_cache_total",
    "Category look-ups at submission: a hit reuses cached misfits, a miss computes them.",
    ["result"],
)
TRANSACTION_RETRIES = Counter(
    "jobmatch_transaction_retries_total",
    "Requests whose transaction lost a race (deadlock, serialization failure, SQLite lock "
    "wait) and ran again (outcome=retried) or ran out of attempts (outcome=gave_up).",
    ["reason", "outcome"],
)
