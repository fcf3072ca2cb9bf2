"""Concurrency under load, end to end (issue 8): clients acting as workers pull and finish
Grid Engine jobs (licence pool, per-host memory, a parallel environment) over HTTP against
`jobmatch serve` with several server processes. PostgreSQL: 8 client processes; SQLite: 8
client threads. No job is dispatched twice, none is lost, nothing is ever overbooked (the
invariant checker on snapshots during the run and at the end), and no client sees a 5xx:
deadlocks, serialization failures and lock waits are retried inside the server.

bench/load.py runs the same load at full size (20,000 jobs, 32 processes) for the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.db.engine import Database
from tests.reliability.load_harness import LoadConfig, run_load, summary, verify

pytestmark = pytest.mark.db

JOBS = 400
CLIENTS = 8


def test_workers_pull_and_finish_under_load(
    backend: str, database: Database, database_url: str, tmp_path: Path
) -> None:
    config = LoadConfig(
        jobs=JOBS,
        clients=CLIENTS,
        mode="processes" if backend == "postgresql" else "threads",
        server_workers=2,
        run_seconds=60.0,
        seed=8,
        submitters=4,
    )
    result = run_load(database_url, config, tmp_path / "server.log")
    numbers = verify(database, result)
    print(summary(result, numbers))
    # The mix really exercised the contended paths.
    assert numbers["parallel finished"] > 0
    assert numbers["with consumables"] > 0
    assert numbers["failed at submission"] > 0
    assert numbers["failed by worker"] > 0
