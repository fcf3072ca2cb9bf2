"""Fixtures of the API tests: apps under an ordering policy other than the default
(docs/ordering.md). The policy is process-global once an app starts, so each fixture
puts the default back after its app stops."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.api.app import create_app
from app.db.engine import Database
from app.matching.ordering import policy
from app.settings import Settings


def _client_under(settings: Settings, database: Database, ordering: str) -> Iterator[TestClient]:
    ordered = settings.model_copy(update={"ordering": ordering})
    with TestClient(create_app(ordered, database=database), raise_server_exceptions=False) as c:
        yield c
    policy.use(policy.DEFAULT)


@pytest.fixture
def fair_client(settings: Settings, database: Database) -> Iterator[TestClient]:
    """An app whose pulls order by fair share between submitters first."""
    yield from _client_under(settings, database, "fair-share,priority,age")


@pytest.fixture
def group_client(settings: Settings, database: Database) -> Iterator[TestClient]:
    """An app whose pulls order by the groups' share first, then the submitters'."""
    yield from _client_under(settings, database, "group-share,fair-share,priority,age")
