"""What a pull, a finish or a batch writes, read back, and steps run in a transaction
that is rolled back afterwards: the express way's tests
(tests/matching/dispatch/test_express.py, test_express_batch.py) hold its rows to the
general way's with these."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.event_loop import EventLoopConnections

#: What a pull or a finish writes, read back without times (the two ways run a moment
#: apart).
SNAPSHOT = {
    "jobs": "SELECT id, state, worker_id, attempts, awaiting_pickup, started_at IS NULL,"
    " ended_at IS NULL, exit_code, output, failure_reason FROM jobs ORDER BY id",
    "allocations": "SELECT job_id, queue_instance_id, slots, released_at IS NULL"
    " FROM allocations ORDER BY id",
    "queue_instances": "SELECT id, used_slots FROM queue_instances ORDER BY id",
    "job_events": "SELECT job_id, kind, worker, detail FROM job_events ORDER BY id",
}


def snapshot(session: Session) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of :data:`SNAPSHOT` as the session's transaction sees them."""
    return {
        table: [tuple(row) for row in session.execute(text(query))]
        for table, query in SNAPSHOT.items()
    }


class _Undo(Exception):
    """Carries a step's outcome out of a transaction that must roll back."""


def express_then_undo(database: Database, step: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The step on a Core connection (the threads' express way), then rolled back: its
    outcome and the rows it left."""
    with database.engine.connect() as connection:
        begun = connection.begin()
        outcome = step(connection)
        rows = {
            table: [tuple(row) for row in connection.execute(text(query))]
            for table, query in SNAPSHOT.items()
        }
        begun.rollback()
    return outcome, rows


def on_loop_then_undo(database: Database, step: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The step on the event loop's connection (app/db/event_loop.py), then rolled back:
    its outcome and the rows it left. Skips the test behind a transaction pooler, where
    the express lane stays in its threads."""
    pool = EventLoopConnections.for_database(database)
    if pool is None:
        pytest.skip("behind a transaction pooler the express lane stays in its threads")

    async def run() -> tuple[Any, Any]:
        pool.bind(asyncio.get_running_loop())
        try:
            async with pool.transaction() as transaction:
                outcome = await step(transaction)
                rows = {}
                for table, query in SNAPSHOT.items():
                    cursor = await transaction.execute(query)
                    rows[table] = [tuple(row) for row in await cursor.fetchall()]
                raise _Undo(outcome, rows)
        except _Undo as undone:
            return undone.args[0], undone.args[1]
        finally:
            await pool.close()

    return asyncio.run(run())
