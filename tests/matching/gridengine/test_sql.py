"""The misfit rows of a *changed worker* (app/matching/gridengine/sql.py, worker scope) agree
with the reference evaluator on both databases (issue 6, speed). The oracle test
(test_sql_matches_evaluator.py) sets every value before submitting, so it only sees the
rows of a new category (category scope); here the categories come first and every value
change recomputes the rows of one worker, or of all at the global level.
"""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import Category, Worker
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.decide import category_lists
from app.matching.gridengine.sql import Scope
from app.matching.gridengine.state import load_state
from app.matching.gridengine.table import load_table
from app.matching.gridengine.values import Target
from app.matching.misfits import fits
from app.matching.requests import JobSpec
from app.matching.submission import submit_job
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec
from tests.support.gridengine_values import define_attributes, give_random_values, random_requests


def test_a_changed_worker_gets_the_misfit_rows_the_evaluator_decides(
    database: Database,
) -> None:
    rng = random.Random(61)
    with database.transaction() as session:
        define_attributes(session)
        workers = [
            upsert_worker(
                session,
                WorkerSpec(
                    name=f"h{index}",
                    queues=tuple(QueueSpec(f"q{n}", rng.randint(1, 2)) for n in range(2)),
                ),
            )[0]
            for index in range(8)
        ]
        # Categories first, values afterwards: every value change recomputes the rows of
        # one worker (or, at the global level, of all) against every existing category.
        jobs = [
            submit_job(session, JobSpec(hard=random_requests(rng)), submitter="t")
            for _ in range(30)
        ]
        set_values(session, Target("global"), "complex_values", {"rank_gt": "0.5"})
        for worker in workers:
            give_random_values(session, rng, worker)
        session.flush()
        table = load_table(session)
        state = load_state(session, table)
        compared = kept = 0
        for job in jobs:
            category = session.get(Category, job.category_id)
            assert category is not None
            hard, soft = category_lists(table, category.hard, category.soft)
            for worker in session.scalars(select(Worker)):
                sql_keeps = bool(
                    session.scalar(select(fits(category.id, worker.id, worker.generation)))
                )
                oracle = any(
                    state.evaluate(slot, hard, soft).fits for slot in state.queue_order([worker.id])
                )
                assert sql_keeps is oracle, (category.hard, worker.name)
                compared += 1
                kept += oracle
        assert compared == 30 * 8 and 0 < kept < compared


def test_a_misfit_scope_names_exactly_one_side() -> None:
    with pytest.raises(ValueError):
        Scope()
    with pytest.raises(ValueError):
        Scope(category_id=1, worker_id=1)
    assert Scope(worker_id=3).params == {"sge_scope_id": 3}
