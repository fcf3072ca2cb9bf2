"""A live `jobmatch serve` and an admin client on it, for the client's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.client import AdminClient
from tests.live_server import LIVE_ADMIN_TOKEN, LiveServer

ADMIN = LIVE_ADMIN_TOKEN


@pytest.fixture
def server(shared_server: LiveServer) -> LiveServer:
    """The test process's shared server, its tables empty (tests/conftest.py)."""
    return shared_server


@pytest.fixture
def admin(server: LiveServer) -> Iterator[AdminClient]:
    with AdminClient(server.base_url, ADMIN) as client:
        yield client
