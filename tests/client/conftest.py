"""A live `jobmatch serve` and an admin client on it, for the client's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.client import AdminClient
from app.db.engine import Database
from tests.live_server import LiveServer

ADMIN = "client-admin"


@pytest.fixture
def server(database_url: str, database: Database, tmp_path: Path) -> Iterator[LiveServer]:
    running = LiveServer(
        database_url,
        tmp_path / "server.log",
        env={"JOBMATCH_LEASE_SWEEP_SECONDS": "0"},
        admin_token=ADMIN,
    )
    running.start()
    yield running
    running.stop()


@pytest.fixture
def admin(server: LiveServer) -> Iterator[AdminClient]:
    with AdminClient(server.base_url, ADMIN) as client:
        yield client
