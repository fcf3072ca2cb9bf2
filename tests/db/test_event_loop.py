"""The event loop's PostgreSQL connections (app/db/event_loop.py): where they serve, what
they do with a connection after an error, and a COMMIT whose outcome nobody knows."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg import pq
from sqlalchemy.exc import DBAPIError

from app.db import notify
from app.db.connections import ConnectionOptions
from app.db.dialect import COMMIT_OUTCOME_UNKNOWN
from app.db.engine import Database
from app.db.event_loop import CommitOutcomeUnknownError, EventLoopConnections


def _pool(database: Database) -> EventLoopConnections:
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's connections are PostgreSQL's (psycopg)")
    pool = EventLoopConnections.for_database(database)
    if pool is None:
        pytest.skip("behind a transaction pooler the express lane stays in its threads")
    return pool


def _backend_of_next_transaction(pool: EventLoopConnections) -> Any:
    async def pid() -> int:
        async with pool.transaction() as transaction:
            return transaction.connection.info.backend_pid

    return pid()


def test_no_pool_on_sqlite_or_behind_a_transaction_pooler(tmp_path: Any) -> None:
    """SQLite has no server connection to share; behind PgBouncer in transaction mode the
    threads' engine turns JIT off per transaction and prepares nothing, which this pool
    would not do (app/db/connections.py)."""
    sqlite = Database(f"sqlite:///{tmp_path / 'e.db'}")
    pooled = Database(
        "postgresql+psycopg://u@127.0.0.1:6432/jobmatch",
        options=ConnectionOptions(behind_pooler=True),
    )
    try:
        assert EventLoopConnections.for_database(sqlite) is None
        assert EventLoopConnections.for_database(pooled) is None
    finally:
        sqlite.dispose()
        pooled.dispose()


def test_it_serves_only_in_the_loop_it_is_bound_to(database: Database) -> None:
    pool = _pool(database)
    assert not pool.usable()  # not bound: an app without a lifespan

    async def bound_here() -> bool:
        pool.bind(asyncio.get_running_loop())
        return pool.usable()

    assert asyncio.run(bound_here())

    async def elsewhere() -> bool:
        return pool.usable()

    assert not asyncio.run(elsewhere())  # a test client's loop of its own per request


def test_a_connection_is_reused_after_a_commit_and_after_a_rolled_back_error(
    database: Database,
) -> None:
    pool = _pool(database)

    async def scenario() -> None:
        pool.bind(asyncio.get_running_loop())
        first = await _backend_of_next_transaction(pool)
        assert await _backend_of_next_transaction(pool) == first
        with pytest.raises(DBAPIError) as raised:  # wrapped as SQLAlchemy wraps it
            async with pool.transaction() as transaction:
                await transaction.execute("SELECT 1 / 0")
        assert isinstance(raised.value.orig, psycopg.errors.DivisionByZero)
        assert await _backend_of_next_transaction(pool) == first  # rolled back, reused
        await pool.close()
        assert not pool.usable()

    asyncio.run(scenario())


def test_a_failed_commit_says_its_outcome_is_unknown_and_drops_the_connection(
    database: Database,
) -> None:
    """The connection dies between the last statement and COMMIT: nobody knows whether
    the transaction was stored, so the error carries the engine's mark (the express lane
    then answers 503 instead of running it again), and the dead connection is not
    handed out again."""
    pool = _pool(database)
    killer = psycopg.connect(str(database.engine.url.set(drivername="postgresql")), autocommit=True)

    async def scenario() -> None:
        pool.bind(asyncio.get_running_loop())
        with pytest.raises(CommitOutcomeUnknownError) as raised:
            async with pool.transaction() as transaction:
                await transaction.execute("SELECT 1")
                doomed = transaction.connection.info.backend_pid
                killer.execute("SELECT pg_terminate_backend(%s)", [doomed])
                await asyncio.sleep(0.2)  # the server closes the socket
        assert getattr(raised.value, COMMIT_OUTCOME_UNKNOWN) is True
        assert isinstance(raised.value.orig, psycopg.OperationalError)
        assert await _backend_of_next_transaction(pool) != doomed
        await pool.close()

    try:
        asyncio.run(scenario())
    finally:
        killer.close()


def test_close_closes_the_idle_connections(database: Database) -> None:
    pool = _pool(database)
    probe = psycopg.connect(str(database.engine.url.set(drivername="postgresql")), autocommit=True)

    async def scenario() -> int:
        pool.bind(asyncio.get_running_loop())
        pid = await _backend_of_next_transaction(pool)
        await pool.close()
        return int(pid)

    try:
        pid = asyncio.run(scenario())
        deadline = time.monotonic() + 5  # the server ends the backend once it reads the close
        while time.monotonic() < deadline:
            alive = probe.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if alive.fetchone() == (0,):
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"backend {pid} still open after close()")
    finally:
        probe.close()


def test_the_statements_of_a_block_run_in_one_transaction_that_its_first_one_opens(
    database: Database,
) -> None:
    """The connection is in autocommit mode and the BEGIN goes with the block's first
    statements: they, and every later one, still share one transaction, which ends with
    the block (a setting local to the transaction is gone in the next)."""
    pool = _pool(database)

    async def scenario() -> tuple[Any, ...]:
        pool.bind(asyncio.get_running_loop())
        async with pool.transaction() as transaction:
            assert transaction.connection.info.transaction_status == pq.TransactionStatus.IDLE
            first = await transaction.execute(
                "SELECT txid_current(), set_config('jm.t', 'x', true)"
            )
            assert transaction.connection.info.transaction_status == pq.TransactionStatus.INTRANS
            later = await transaction.execute("SELECT txid_current(), current_setting('jm.t')")
            opened = (await first.fetchone(), await later.fetchone())
        async with pool.transaction() as transaction:
            after = await transaction.execute("SELECT current_setting('jm.t', true)")
            gone = await after.fetchone()
        await pool.close()
        return opened, gone

    ((first_id, _), (later_id, setting)), (left,) = asyncio.run(scenario())
    assert first_id == later_id and setting == "x"
    assert left in ("", None)


def test_an_announcement_that_fails_before_the_commit_stores_nothing_and_says_so(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The announcements go with the COMMIT in one round trip. When the ``pg_notify``
    fails (here a payload longer than PostgreSQL's 8,000 bytes), the COMMIT never ran:
    the error is an ordinary one (not an unknown outcome), nothing is stored, and the
    connection serves the next transaction."""
    pool = _pool(database)
    probe = psycopg.connect(str(database.engine.url.set(drivername="postgresql")), autocommit=True)

    async def scenario() -> tuple[Any, Any]:
        pool.bind(asyncio.get_running_loop())
        first = await _backend_of_next_transaction(pool)
        monkeypatch.setattr(notify, "payload_to_send", lambda _transaction: "x" * 9000)
        with pytest.raises(DBAPIError) as raised:
            async with pool.transaction() as transaction:
                await transaction.execute("CREATE TABLE jm_announce_probe (id int)")
        assert not isinstance(raised.value, CommitOutcomeUnknownError)
        monkeypatch.setattr(notify, "payload_to_send", lambda _transaction: None)
        assert await _backend_of_next_transaction(pool) == first
        await pool.close()
        return raised.value.orig, probe.execute(
            "SELECT to_regclass('jm_announce_probe')"
        ).fetchone()

    try:
        error, (table,) = asyncio.run(scenario())
    finally:
        probe.execute("DROP TABLE IF EXISTS jm_announce_probe")
        probe.close()
    assert isinstance(error, psycopg.errors.InvalidParameterValue)
    assert table is None
