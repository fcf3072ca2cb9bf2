"""The event loop's pipelined round trips (app/db/loop_pipeline.py): the rows psycopg's
own cursors give, statements prepared once per text and parameter types, errors raised
as psycopg raises them, and a round trip cut short closing its connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import pq

from app.db import loop_pipeline
from app.db.engine import Database
from app.db.loop_pipeline import BEGIN, COMMIT, ROLLBACK, Command, LoopPipeline, Query

Result = TypeVar("Result")


def _url(database: Database) -> str:
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's connections are PostgreSQL's (psycopg)")
    return str(database.engine.url.set(drivername="postgresql"))


def _on_pipeline(
    database: Database, scenario: Callable[[LoopPipeline], Awaitable[Result]]
) -> Result:
    url = _url(database)

    async def run() -> Result:
        connection = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            return await scenario(LoopPipeline(connection))
        finally:
            await connection.close()

    return asyncio.run(run())


def _prepared_names(connection: psycopg.AsyncConnection[Any]) -> Awaitable[Any]:
    async def names() -> list[str]:
        cursor = await connection.execute(
            "SELECT name FROM pg_prepared_statements WHERE name LIKE 'jm_loop_%' ORDER BY name"
        )
        return [row[0] for row in await cursor.fetchall()]

    return names()


def test_the_rows_are_the_ones_psycopgs_cursor_gives(database: Database) -> None:
    sql = "SELECT $1::int + 1, $2::text || 'x', $3::timestamptz, $4::bool, NULL::int, $5::jsonb"
    moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    params = (41, "a", moment, True, '{"k": [1, 2]}')

    async def scenario(pipeline: LoopPipeline) -> tuple[Any, Any]:
        (rows,) = await pipeline.run([Query(sql.encode(), params)])
        cursor = psycopg.AsyncRawCursor(pipeline.connection)
        await cursor.execute(sql, params)
        return rows, await cursor.fetchall()

    ours, psycopgs = _on_pipeline(database, scenario)
    assert ours == psycopgs == [(42, "ax", moment, True, None, {"k": [1, 2]})]


def test_a_transaction_in_one_round_trip_and_a_statement_prepared_once(
    database: Database,
) -> None:
    """BEGIN, the statements and COMMIT in one pipeline; the same text again runs the
    statement prepared the first time, and other parameter types prepare another."""
    sql = b"SELECT $1::bigint * 2"

    async def scenario(pipeline: LoopPipeline) -> tuple[Any, ...]:
        first = await pipeline.run(
            [BEGIN, Query(sql, (2,)), Query(b"SELECT txid_current()", ()), COMMIT]
        )
        status = pipeline.connection.info.transaction_status
        names_after_first = await _prepared_names(pipeline.connection)
        again = await pipeline.run([Query(sql, (3,))])
        names_after_again = await _prepared_names(pipeline.connection)
        wider = await pipeline.run([Query(sql, (2**40,))])
        return (
            first,
            status,
            names_after_first,
            again,
            names_after_again,
            wider,
            (await _prepared_names(pipeline.connection)),
        )

    first, status, names, again, names_again, wider, names_wider = _on_pipeline(database, scenario)
    assert first[0] == [] and first[1] == [(4,)] and first[3] == []
    assert status == pq.TransactionStatus.IDLE  # committed
    assert len(names) == 2 and names_again == names  # the same statement, run again
    assert again == [[(6,)]] and wider == [[(2**41,)]]
    assert len(names_wider) == 3  # an int8 parameter is another statement than an int2


def test_an_error_is_psycopgs_and_the_statements_after_it_did_not_run(
    database: Database,
) -> None:
    """The first error stops the pipeline; the transaction is left failed until a
    ROLLBACK, and a statement whose prepare was skipped is prepared again next time."""
    later = b"SELECT $1::int + 100"

    async def scenario(pipeline: LoopPipeline) -> tuple[Any, ...]:
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            await pipeline.run([BEGIN, Query(b"SELECT 1 / $1::int", (0,)), Query(later, (1,))])
        failed = pipeline.connection.info.transaction_status
        await pipeline.run([ROLLBACK])
        rows = await pipeline.run([Query(later, (1,))])
        return raised.value, failed, pipeline.connection.info.transaction_status, rows

    error, failed, after, rows = _on_pipeline(database, scenario)
    assert error.sqlstate == "22012"
    assert failed == pq.TransactionStatus.INERROR
    assert after == pq.TransactionStatus.IDLE
    assert rows == [[(101,)]]


def test_past_the_most_it_keeps_a_statement_runs_unnamed(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No run of distinct texts grows a connection's prepared statements past
    MAX_PREPARED: the rest are parsed each time, with the same answers."""
    monkeypatch.setattr(loop_pipeline, "MAX_PREPARED", 2)

    async def scenario(pipeline: LoopPipeline) -> tuple[Any, ...]:
        rows = []
        for number in range(5):
            rows += await pipeline.run([Query(f"SELECT $1::int + {number}".encode(), (1,))])
        return rows, await _prepared_names(pipeline.connection)

    rows, names = _on_pipeline(database, scenario)
    assert rows == [[(1,)], [(2,)], [(3,)], [(4,)], [(5,)]]
    assert len(names) == 2


def test_a_round_trip_cut_short_closes_its_connection(database: Database) -> None:
    """A task cancelled while it waits for the answers leaves the connection
    mid-pipeline: it is closed, never used again half-read."""

    async def scenario(pipeline: LoopPipeline) -> bool:
        task = asyncio.ensure_future(pipeline.run([Query(b"SELECT pg_sleep($1)", (5,))]))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pipeline.connection.broken or pipeline.connection.closed

    assert _on_pipeline(database, scenario)


def test_a_command_has_no_rows(database: Database) -> None:
    async def scenario(pipeline: LoopPipeline) -> Any:
        return await pipeline.run([Command(b"BEGIN"), Command(b"SET LOCAL jit = off"), COMMIT])

    assert _on_pipeline(database, scenario) == [[], [], []]


def test_a_statement_a_change_of_its_table_made_stale_closes_its_connection(
    database: Database,
) -> None:
    """A table changed under a prepared statement (as a migration may change one while
    the server runs): PostgreSQL refuses the statement ("cached plan must not change
    result type"), and the connection is closed, so that the pool's next one prepares it
    anew instead of failing on it again."""
    sql = b"SELECT * FROM jm_stale_probe"

    async def scenario(pipeline: LoopPipeline) -> tuple[Any, ...]:
        connection = pipeline.connection
        await connection.execute("CREATE TEMPORARY TABLE jm_stale_probe (id int)")
        await connection.execute("INSERT INTO jm_stale_probe VALUES (1)")
        first = await pipeline.run([Query(sql, ())])
        await connection.execute("ALTER TABLE jm_stale_probe ADD COLUMN name text")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as raised:
            await pipeline.run([Query(sql, ())])
        return first, raised.value.sqlstate, connection.broken or connection.closed

    first, sqlstate, closed = _on_pipeline(database, scenario)
    assert first == [[(1,)]]
    assert sqlstate == "0A000"
    assert closed
