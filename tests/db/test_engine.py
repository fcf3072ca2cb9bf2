"""Engine set-up: SQLite pragmas and BEGIN handling; transactions on both databases."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import select, text

from app.db.engine import Database
from app.db.models import ApiToken, Role


def test_sqlite_pragmas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    database = Database(f"sqlite:///{tmp_path / 'p.db'}", busy_timeout=7)
    with database.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 7000
    database.dispose()


def test_sqlite_write_transaction_takes_the_lock_at_begin(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "lock.db"
    database = Database(f"sqlite:///{path}")
    with database.transaction(write=True) as session:
        session.execute(text("SELECT 1"))  # a read only: a deferred BEGIN would take no lock
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        other.close()
    database.dispose()


def test_sqlite_read_transaction_does_not_block_writers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "read.db"
    database = Database(f"sqlite:///{path}")
    with database.transaction(write=False) as session:
        session.execute(text("SELECT 1"))
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        other.close()
    database.dispose()


def test_rollback_on_error_and_savepoints(database: Database) -> None:
    with pytest.raises(RuntimeError), database.transaction() as session:
        session.add(ApiToken(token_hash="a" * 64, role=Role.WORKER, subject="w"))
        session.flush()
        raise RuntimeError("boom")
    with database.transaction() as session:
        assert session.scalar(select(ApiToken)) is None
        session.add(ApiToken(token_hash="b" * 64, role=Role.WORKER, subject="w"))
        nested = session.begin_nested()
        session.add(ApiToken(token_hash="c" * 64, role=Role.WORKER, subject="w"))
        session.flush()
        nested.rollback()
    with database.transaction(write=False) as session:
        assert [t.token_hash for t in session.scalars(select(ApiToken))] == ["b" * 64]


def test_timestamps_come_back_aware(database: Database) -> None:
    with database.transaction() as session:
        session.add(ApiToken(token_hash="d" * 64, role=Role.SUBMITTER, subject="s"))
    with database.transaction(write=False) as session:
        row = session.scalars(select(ApiToken)).one()
        assert row.created_at.tzinfo is not None


def test_pool_and_pooler_settings_reach_the_engine() -> None:
    """JOBMATCH_DB_POOL_SIZE, _MAX_OVERFLOW and _POOLER (issue 25): behind a pooler psycopg
    prepares nothing and no startup option is sent (tests/db/test_pgbouncer.py shows why)."""
    from app.db import dialect
    from app.db.connections import ConnectionOptions
    from app.settings import Settings

    url = "postgresql+psycopg://u@127.0.0.1:6432/jobmatch"
    direct = dialect.engine_arguments(url, busy_timeout=1, options=ConnectionOptions())
    assert direct["pool_size"] == 20 and direct["max_overflow"] == 0
    assert direct["connect_args"] == {"options": "-c jit=off"}

    settings = Settings(db_pool_size=3, db_max_overflow=0, db_pooler="pgbouncer")
    pooled = dialect.engine_arguments(
        url, busy_timeout=1, options=ConnectionOptions.from_settings(settings)
    )
    assert pooled["pool_size"] == 3 and pooled["max_overflow"] == 0
    assert pooled["connect_args"] == {"prepare_threshold": None}

    again = Settings(db_pooler="pgbouncer", db_prepared_statements=True)
    assert ConnectionOptions.from_settings(again).prepares_statements
    database = Database(url, options=ConnectionOptions.from_settings(settings))
    try:
        assert database.engine.pool.size() == 3  # type: ignore[attr-defined]
        assert database.listen_url is None  # behind a pooler without a direct URL
    finally:
        database.dispose()


def test_the_readiness_checks_leave_the_pooled_connections_prepared_statements(
    database: Database,
) -> None:
    """psycopg forgets every prepared statement of a connection at each ROLLBACK (it sends
    DEALLOCATE ALL), and the pool rolls back a connection returned inside a transaction.
    ``/readyz`` runs :meth:`Database.ping` and ``current_revisions`` on pooled
    connections, so a probe every few seconds would cost the next pulls on them a fresh
    parse and plan of each statement (the take's plan alone: 0.74 ms median at 10,000
    workers). Both end their read with a COMMIT instead."""
    if database.dialect_name != "postgresql":
        pytest.skip("prepared statements are psycopg's (PostgreSQL)")
    from app.db.migrate import current_revisions

    probe = text("SELECT count(*) FROM workers WHERE id = :id")
    database.engine.dispose()  # one fresh pooled connection, reused by every step below
    with database.engine.connect() as connection:
        for _ in range(6):  # psycopg prepares on the fifth run
            connection.execute(probe, {"id": 1})
        connection.commit()
        backend = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        connection.commit()
    database.ping()
    assert current_revisions(database.engine)
    with database.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT pg_backend_pid()").scalar() == backend
        prepared = connection.execute(
            text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE :probe"),
            {"probe": "%FROM workers WHERE id%"},
        ).scalar()
        connection.commit()
    assert prepared == 1
