"""Metrics and logs of a real `jobmatch serve --workers 3` (issue 25).

Metrics: before, `/metrics` read the answering process's own registry, so successive
scrapes of a multi-process server saw one process's counters each (the issue measured
summed request counts of 9, 5, 6, 3, 7, 6). Here known traffic is sent to three worker
processes and every scrape, whichever process answers it, must show the exact totals,
never fewer than the scrape before.

Logs: every line the served process writes to stderr must be one JSON object, without
uvicorn's ``color_message`` or an ANSI escape; the access log names the request id and the
caller; each change of a job or a worker is a domain event; probes, idle pulls and
Alembic's notes at /readyz stay out of INFO.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from tests.live_server import LiveServer

pytestmark = pytest.mark.db

SUBMISSIONS = 12
SLOTS = 5
SCRAPES = 6


def sample(text: str, name: str, labels: str = "") -> float:
    """The value of one sample of the Prometheus text ``text``; 0 when it is absent (a
    labelled counter appears once it was first counted)."""
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        key, value = line.rsplit(" ", 1)
        if key == wanted:
            return float(value)
    return 0.0


@pytest.fixture
def server(
    backend: str, database_url: str, database: Database, tmp_path: Path
) -> Iterator[LiveServer]:
    if backend != "postgresql":
        pytest.skip("a multi-process deployment runs on PostgreSQL (SQLite is one process)")
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    # A file left by an earlier run: the server must wipe it, or the scrape would fail on
    # it (it is no valid metrics file) or add its counts to this run's.
    (metrics_dir / "counter_1.db").write_bytes(b"left over from an earlier run")
    live = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={"JOBMATCH_LOG_LEVEL": "INFO", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
        args=("--workers", "3"),
    )
    # Three processes importing the app at once: minutes on a loaded 2-core host.
    live.start(timeout=300)
    try:
        live.wait_for_processes(3)
        yield live
    finally:
        live.stop()


#: Seconds one request may take: the first on each process connects to the database and
#: compiles its statements, slowly on a loaded 2-core host.
TIMEOUT = 120.0


def _traffic(server: LiveServer) -> None:
    """One worker with SLOTS slots, SUBMISSIONS jobs, SLOTS + 1 pulls (the last finds no
    free slot and answers 204), one job finished, one probe of each kind."""
    status, worker = server.request(
        "POST",
        "/v1/workers",
        {"name": "w1", "resources": "language: ?java", "slots": SLOTS},
        timeout=TIMEOUT,
    )
    assert status == 201, worker
    for number in range(SUBMISSIONS):
        status, body = server.request(
            "POST",
            "/v1/jobs",
            {"resources": "language: java"},
            headers={"X-Request-ID": f"submit-{number}"},
            timeout=TIMEOUT,
        )
        assert status == 201, body
    pulled: list[int] = []
    first_job = None
    for _ in range(SLOTS + 1):
        status, body = server.request(
            "POST", "/v1/workers/w1/pull", token=worker["token"], timeout=TIMEOUT
        )
        pulled.append(status)
        if status == 200 and first_job is None:
            first_job = body["id"]
    assert pulled == [200] * SLOTS + [204]
    status, body = server.request(
        "POST",
        f"/v1/jobs/{first_job}/finish",
        {"outcome": "finished"},
        token=worker["token"],
        timeout=TIMEOUT,
    )
    assert status == 200, body
    for path in ("/healthz", "/readyz"):
        status, _ = server.request("GET", path, token="", timeout=TIMEOUT)
        assert status == 200


def test_every_scrape_of_three_processes_counts_all_of_them(server: LiveServer) -> None:
    _traffic(server)
    previous: dict[str, float] = {}
    for scrape in range(SCRAPES):
        status, text = server.request("GET", "/metrics", token="", timeout=TIMEOUT)
        assert status == 200
        assert isinstance(text, str)
        post = 'method="POST",route="/v1/jobs",status="201"'
        figures = {
            "submissions": sample(text, "jobmatch_http_request_duration_seconds_count", post),
            "pulls_200": sample(
                text,
                "jobmatch_http_request_duration_seconds_count",
                'method="POST",route="/v1/workers/{name}/pull",status="200"',
            ),
            "pulls_204": sample(
                text,
                "jobmatch_http_request_duration_seconds_count",
                'method="POST",route="/v1/workers/{name}/pull",status="204"',
            ),
            "scrapes": sample(
                text,
                "jobmatch_http_request_duration_seconds_count",
                'method="GET",route="/metrics",status="200"',
            ),
            "dispatches": sample(text, "jobmatch_dispatch_duration_seconds_count", 'outcome="job"'),
            "waits": sample(text, "jobmatch_job_wait_seconds_count"),
            "misses": sample(text, "jobmatch_category_cache_total", 'result="miss"'),
            "hits": sample(text, "jobmatch_category_cache_total", 'result="hit"'),
        }
        # Exact, whichever of the three processes answered; a scrape is counted once it
        # has answered, so this one sees the ones before it.
        assert figures == {
            "submissions": SUBMISSIONS,
            "pulls_200": SLOTS,
            "pulls_204": 1,
            "scrapes": scrape,
            "dispatches": SLOTS,
            "waits": SLOTS,
            "misses": 1,
            "hits": SUBMISSIONS - 1,
        }, text
        assert all(figures[key] >= value for key, value in previous.items())
        previous = figures
        # Read from the database at scrape time: the same truth from every process.
        assert sample(text, "jobmatch_jobs", 'state="running"') == SLOTS - 1
        assert sample(text, "jobmatch_jobs", 'state="finished"') == 1
        assert sample(text, "jobmatch_jobs", 'state="waiting"') == SUBMISSIONS - SLOTS
        assert sample(text, "jobmatch_workers", 'state="active"') == 1
        assert sample(text, "jobmatch_slots_capacity") == SLOTS
        assert sample(text, "jobmatch_slots_booked") == SLOTS - 1
        assert sample(text, "jobmatch_longpoll_waiting") == 0
    assert not re.search(r"^jobmatch_slots\{", text, re.M)


def _lines(log: Path) -> list[dict[str, Any]]:
    """Every line of the server's output, each parsed as one JSON object."""
    records = []
    for number, line in enumerate(log.read_text(encoding="utf-8").splitlines(), 1):
        assert "\x1b" not in line, f"line {number} has an ANSI escape: {line!r}"
        record = json.loads(line)
        assert isinstance(record, dict), f"line {number} is not an object: {line!r}"
        records.append(record)
    return records


def test_the_server_logs_clean_json_with_callers_and_domain_events(server: LiveServer) -> None:
    _traffic(server)
    server.stop()  # its last lines written
    records = _lines(server.log)
    assert records, "the server logged nothing"
    for record in records:
        assert {"time", "level", "logger", "message", "request_id"} <= record.keys(), record
        assert "color_message" not in record, record
    assert any(r["logger"] == "uvicorn.error" for r in records)  # uvicorn's own, cleaned
    assert not [r for r in records if r["logger"].startswith("alembic")]

    access = [r for r in records if r["logger"] == "app.access"]
    submits = [r for r in access if r["route"] == "/v1/jobs" and r["method"] == "POST"]
    assert sorted(r["request_id"] for r in submits) == sorted(
        f"submit-{n}" for n in range(SUBMISSIONS)
    )
    assert {(r["role"], r["subject"], r["status"]) for r in submits} == {("admin", "admin", 201)}
    pulls = [r for r in access if r["path"] == "/v1/workers/w1/pull"]
    # The idle 204 pull is a DEBUG line: not at INFO.
    assert [(r["role"], r["subject"], r["status"]) for r in pulls] == [
        ("worker", "w1", 200)
    ] * SLOTS
    assert not [r for r in access if r["path"] in ("/healthz", "/readyz")]

    events = [r for r in records if r["logger"] == "app.events"]
    kinds = Counter(r["event"] for r in events)
    assert kinds == {
        "worker.registered": 1,
        "job.submitted": SUBMISSIONS,
        "job.dispatched": SLOTS,
        "job.finished": 1,
    }, kinds
    submitted = [r for r in events if r["event"] == "job.submitted"]
    # Logged inside its request: the event carries the request's id.
    assert sorted(r["request_id"] for r in submitted) == sorted(
        f"submit-{n}" for n in range(SUBMISSIONS)
    )
    assert {r["worker"] for r in events if r["event"] == "job.dispatched"} == {"w1"}
