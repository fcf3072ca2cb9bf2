"""The rate limit holds for the whole server (issue 37): under `jobmatch serve --workers 2`
each process keeps half of a token's budget, so a token gets no more than the limit in
all, wherever its connections land. Before, each process kept the whole budget and a
token could make up to twice the limit."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.engine import Database
from tests.live_server import LiveServer

PER_SECOND = 1.0
BURST = 10
PROCESSES = 2
REQUESTS = 60


@pytest.fixture
def server(
    backend: str, database_url: str, database: Database, tmp_path: Path
) -> Iterator[LiveServer]:
    if backend != "postgresql":
        pytest.skip("a multi-process deployment runs on PostgreSQL (SQLite is one process)")
    live = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={
            "JOBMATCH_LOG_LEVEL": "INFO",
            "JOBMATCH_RATE_LIMIT_PER_SECOND": str(PER_SECOND),
            "JOBMATCH_RATE_LIMIT_BURST": str(BURST),
        },
        args=("--workers", str(PROCESSES)),
    )
    live.start(timeout=300)
    try:
        live.wait_for_processes(PROCESSES)
        yield live
    finally:
        live.stop()


def test_a_token_gets_the_limit_in_all_from_two_processes(server: LiveServer) -> None:
    status, issued = server.request(
        "POST", "/v1/tokens", {"role": "submitter", "subject": "script"}, timeout=120
    )
    assert status == 201, issued
    token = issued["token"]
    started = time.monotonic()
    # Each request on a connection of its own: the two processes take them as they come.
    answers = Counter(
        server.request("GET", "/v1/jobs?limit=1", token=token, timeout=120)[0]
        for _ in range(REQUESTS)
    )
    elapsed = time.monotonic() - started
    assert set(answers) <= {200, 429}, answers
    # Each process allows BURST / PROCESSES at once and PER_SECOND / PROCESSES a second:
    # together, the limit (plus one refill for a request racing the clock).
    assert answers[200] <= BURST + PER_SECOND * elapsed + 1, (answers, elapsed)
    assert answers[200] >= BURST // PROCESSES, answers
    # The refusal says whose share it is.
    refusals = [
        body
        for status, body in (
            server.request("GET", "/v1/jobs?limit=1", token=token, timeout=120) for _ in range(10)
        )
        if status == 429
    ]
    assert refusals, "the budget refilled faster than ten requests"
    assert f"share of the {PROCESSES} processes' limit" in refusals[0]["detail"]
