"""Throwaway databases for tests: a SQLite file, or a fresh PostgreSQL database.

PostgreSQL is used when JOBMATCH_TEST_POSTGRES_URL names a server (any database on it; the
tests create their own next to it and drop them afterwards).

A migrated database is a copy of one migrated once per test run (:func:`migrated_database`):
a SQLite file copied with SQLite's backup API, a PostgreSQL database created with
``CREATE DATABASE ... TEMPLATE``. The template is built by whichever process of the run
(pytest-xdist runs several) needs it first, under a file lock in the run's shared directory,
and the run's controlling process drops the PostgreSQL one at the end
(:func:`drop_templates`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.db import migrate

POSTGRES_ENV = "JOBMATCH_TEST_POSTGRES_URL"
BACKENDS = ("sqlite", "postgresql")


#: Set when POSTGRES_ENV names a pooler in front of the server (tests/db/test_pgbouncer.py
#: runs cases through PgBouncer): the server itself, where LISTEN connects and where
#: databases are created, copied and dropped. Through a pooler, the template would still
#: be held by the pooler's idle connections when it is copied.
DIRECT_SERVER_ENV = "JOBMATCH_TEST_POSTGRES_DIRECT_URL"


def postgres_server_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


def _direct_server_url() -> str | None:
    return os.environ.get(DIRECT_SERVER_ENV) or postgres_server_url()


def _admin_execute(statement: str) -> None:
    server = _direct_server_url()
    if server is None:
        raise RuntimeError(f"{POSTGRES_ENV} is not set")
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(statement))
    finally:
        admin.dispose()


def _postgres_url(name: str, *, direct: bool = False) -> str:
    server = _direct_server_url() if direct else postgres_server_url()
    if server is None:
        raise RuntimeError(f"{POSTGRES_ENV} is not set")
    return make_url(server).set(database=name).render_as_string(hide_password=False)


@contextmanager
def fresh_database(backend: str, directory: Path) -> Iterator[str]:
    """Yield the URL of an empty database of that backend; remove it afterwards."""
    if backend == "sqlite":
        path = directory / f"jobmatch-{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}"
        return
    name = f"jobmatch_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        yield _postgres_url(name)
    finally:
        # Dropped when the user fails too (a bench's error, a test's teardown).
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_directory(config: pytest.Config) -> Path:
    """The temporary directory every process of the test run sees: with pytest-xdist each
    worker's own directory is inside its controller's."""
    own = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return own.parent if hasattr(config, "workerinput") else own


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _template(backend: str, shared: Path) -> str:
    """The run's migrated template of the backend (a file path, or a database name),
    built by the first caller; the caller holds the lock."""
    record = shared / f"template-{backend}.txt"
    if record.exists():
        return record.read_text()
    if backend == "sqlite":
        path = shared / "template.db"
        migrate.upgrade(f"sqlite:///{path}")
        made = str(path)
    else:
        made = f"jobmatch_test_template_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        _admin_execute(f'CREATE DATABASE "{made}"')
        migrate.upgrade(_postgres_url(made, direct=True))
    record.write_text(made)
    return made


@contextmanager
def migrated_database(backend: str, directory: Path, shared: Path) -> Iterator[str]:
    """Yield the URL of a database of that backend at the migrations' head, a copy of the
    run's template (``shared``: the directory every process of the run sees); remove it
    afterwards."""
    with _locked(shared / f"template-{backend}.lock"):
        template = _template(backend, shared)
        if backend == "sqlite":
            path = directory / f"jobmatch-{uuid.uuid4().hex[:8]}.db"
            with sqlite3.connect(template) as source, sqlite3.connect(path) as copy:
                source.backup(copy)
            source.close()
            copy.close()
        else:
            name = f"jobmatch_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
            _admin_execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    if backend == "sqlite":
        yield f"sqlite:///{path}"
        return
    try:
        yield _postgres_url(name)
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_templates(shared: Path) -> None:
    """Drop the run's PostgreSQL template, if one was made (the SQLite one is a file of
    the run's temporary directory)."""
    record = shared / "template-postgresql.txt"
    if record.exists() and postgres_server_url() is not None:
        _admin_execute(f'DROP DATABASE IF EXISTS "{record.read_text()}" WITH (FORCE)')
        record.unlink()
