"""Throwaway databases for tests: a SQLite file, or a fresh PostgreSQL database.

PostgreSQL is used when JOBMATCH_TEST_POSTGRES_URL names a server (any database on it; the
tests create their own next to it and drop them afterwards).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_ENV = "JOBMATCH_TEST_POSTGRES_URL"
BACKENDS = ("sqlite", "postgresql")


def postgres_server_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


@contextmanager
def fresh_database(backend: str, directory: Path) -> Iterator[str]:
    """Yield the URL of an empty database of that backend; remove it afterwards."""
    if backend == "sqlite":
        path = directory / f"jobmatch-{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}"
        return
    server = postgres_server_url()
    if server is None:
        raise RuntimeError(f"{POSTGRES_ENV} is not set")
    name = f"jobmatch_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server).set(database=name).render_as_string(hide_password=False)
        finally:
            # Dropped when the user fails too (a bench's error, a test's teardown).
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
