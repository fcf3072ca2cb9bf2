"""Fixtures shared by every test that touches the database.

Database tests run once per backend: always on SQLite, and on PostgreSQL when
JOBMATCH_TEST_POSTGRES_URL is set. Each backend gets one database per test session, built
by the migrations (never create_all); each test starts from empty tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.api.app import create_app
from app.db import migrate
from app.db.base import Base
from app.db.engine import Database
from app.settings import Settings
from tests.databases import BACKENDS, fresh_database, postgres_server_url
from tests.support.table_digest import empty_tables

ADMIN_TOKEN = "test-admin-token"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True, scope="session")


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "postgresql" and postgres_server_url() is None:
        pytest.skip("PostgreSQL not configured (set JOBMATCH_TEST_POSTGRES_URL)")
    return name


@pytest.fixture(scope="session")
def database_url(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database of the backend, migrated to head once per test session."""
    with fresh_database(backend, tmp_path_factory.mktemp(backend)) as url:
        migrate.upgrade(url)
        yield url


@pytest.fixture(scope="session")
def _session_database(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def database(_session_database: Database) -> Iterator[Database]:
    """The migrated database, with every non-seeded table empty at the start of the test."""
    empty_tables(_session_database, Base.metadata)
    yield _session_database


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        admin_token=SecretStr(ADMIN_TOKEN),
        log_format="text",
        log_level="WARNING",
    )


@pytest.fixture
def client(settings: Settings, database: Database) -> Iterator[TestClient]:
    app = create_app(settings, database=database)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]
