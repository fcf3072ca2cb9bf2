"""has_complex_values (app/matching/gridengine/decide.py), the pull's check whether a
worker needs the evaluator at all, reads the attribute table in the same statement, and
the transaction's next load_table is served from that read once (issue 6, speed).
"""

from __future__ import annotations

import random

from sqlalchemy import event

from app.db.engine import Database
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.decide import has_complex_values
from app.matching.gridengine.table import load_table
from app.matching.gridengine.values import Target
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec
from tests.support.gridengine_values import evaluator_cluster


def test_the_table_read_with_has_complex_values_serves_the_next_load_once(
    database: Database,
) -> None:
    with database.transaction() as session:
        workers = evaluator_cluster(session, random.Random(65))
        bare, _ = upsert_worker(session, WorkerSpec(name="bare", queues=(QueueSpec("a", 1),)))
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        with database.transaction() as session:
            expected = load_table(session)
            statements.clear()
            assert has_complex_values(session, workers[0].id)
            assert load_table(session) is expected
            assert len(statements) == 1
            assert load_table(session) is expected
            assert len(statements) == 2  # served once, then read again
            set_values(session, Target("global"), "complex_values", {})
            assert has_complex_values(session, workers[0].id)
            assert not has_complex_values(session, bare.id)
        with database.transaction() as session:
            # A new transaction never sees rows read in an earlier one.
            statements.clear()
            assert load_table(session) is expected
            assert len(statements) == 1
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
