"""Prometheus metrics shared by the layers that observe something.

Counters and histograms live here (neither SQL nor HTTP), so the matching services can
count cache hits and the API can time requests without importing each other. Gauges that
describe the database (jobs and workers by state, booked and total slots) are computed at
scrape time by the process that answers (app/api/routes/metrics.py): the database is the
truth, whichever process reads it.

With several server processes (`jobmatch serve --workers N`) each process counts in its
own memory, and a scrape reaches one of them. `jobmatch serve` therefore sets
PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode) before any worker starts:
every process then writes its counters, histograms and live gauges to files there, and a
scrape sums them over all processes. Names follow Prometheus' conventions: counters end in
``_total``, durations are in seconds and end in ``_seconds``.
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Gauge, Histogram

#: The environment variable prometheus-client reads (when it is imported) to count in files
#: (app/cli/metrics_dir.py sets it).
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

REQUEST_LATENCY = Histogram(
    "jobmatch_http_request_duration_seconds",
    "HTTP request latency by method, route template and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
DISPATCH_LATENCY = Histogram(
    "jobmatch_dispatch_duration_seconds",
    "Time to choose and book a job for a pulling worker (outcome=job) or to find none "
    "(outcome=none).",
    ["outcome"],
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
)
JOB_WAIT = Histogram(
    "jobmatch_job_wait_seconds",
    "Time from a job's submission to its dispatch to a worker (observed at the dispatch).",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400),
)
CATEGORY_LOOKUPS = Counter(
    "jobmatch_category_cache_total",
    "Category (misfit cache) look-ups at submission: a hit reuses the category's cached "
    "misfits, a miss computes them.",
    ["result"],
)
TRANSACTION_RETRIES = Counter(
    "jobmatch_transaction_retries_total",
    "Requests whose transaction lost a race (deadlock, serialization failure, SQLite lock "
    "wait) and ran again (outcome=retried) or ran out of attempts (outcome=gave_up).",
    ["reason", "outcome"],
)
EXPRESS_REQUESTS = Counter(
    "jobmatch_express_requests_total",
    "Pulls, finishes and submissions the express lane saw (operation), answered itself "
    "(outcome=served) "
    "or handed to the full route (outcome=handed_over: an error to word, a long poll, ...).",
    ["operation", "outcome"],
)
LEASE_EXPIRIES = Counter(
    "jobmatch_lease_expiries_total",
    "Running jobs whose worker was not heard from within the lease: requeued, or failed "
    "after too many attempts (outcome).",
    ["outcome"],
)
REQUEUES = Counter(
    "jobmatch_job_requeues_total",
    "Running jobs put back in the queue, by why: lease_expired, or worker_deleted.",
    ["reason"],
)
LONGPOLL_WAITING = Gauge(
    "jobmatch_longpoll_waiting",
    "Pulls waiting for work (?wait=), summed over the live server processes.",
    multiprocess_mode="livesum",
)
LONGPOLL_SUPERSEDED = Counter(
    "jobmatch_longpoll_superseded_total",
    "Waiting pulls answered at once because a newer pull of the same worker took their place.",
)
REFUSED_OVERLOADED = Counter(
    "jobmatch_overload_refusals_total",
    "Requests answered 503 because a budget of the server process was full, by budget: "
    "connections (ordinary requests) or waiting_pulls.",
    ["budget"],
)
LONGPOLL_ANNOUNCEMENTS = Counter(
    "jobmatch_longpoll_announcements_total",
    "Announcements (submissions, finishes, worker changes, ...) the server processes heard.",
)
LONGPOLL_WAKEUPS = Counter(
    "jobmatch_longpoll_wakeups_total",
    "Waiting pulls woken by an announcement (each then tries to pull once).",
)
LONGPOLL_QUIET_RENEWALS = Counter(
    "jobmatch_longpoll_quiet_renewals_total",
    "Waiting pulls that started without an attempt of their own: nothing announced since "
    "their worker's last attempt concerned it.",
)
LONGPOLL_FIT_CHECKS = Counter(
    "jobmatch_longpoll_fit_checks_total",
    "Statements sent to learn which waiting workers fit a category.",
)


def multiprocess_dir() -> str | None:
    """The directory the processes count in, or None when each counts in its own memory."""
    return os.environ.get(MULTIPROC_DIR_VARIABLE) or None


def forget_this_process() -> None:
    """Drop this process's live gauges (its waiting pulls) from the shared counts as it
    stops; its counters and histograms stay, as a counter must never go down."""
    if multiprocess_dir() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
