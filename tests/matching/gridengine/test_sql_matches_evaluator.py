"""The SQL misfit cache decides as the reference evaluator does (app/notations/
complex_matching.py), on generated clusters with static values, on both databases: a
worker is kept exactly when some queue instance of it fits. Covers numbers with every
relop, strings with wildcards and expressions (the regex compilation on PostgreSQL ~ and
SQLite REGEXP), CSTRING folding, FORCED attributes, consumable defaults and unknown
attributes."""

from __future__ import annotations

import random

from sqlalchemy import select

from app.db.engine import Database
from app.db.models import Category, Worker
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.decide import category_lists
from app.matching.gridengine.state import load_state
from app.matching.gridengine.table import load_table
from app.matching.gridengine.values import Target
from app.matching.misfits import fits
from app.matching.requests import JobSpec
from app.matching.submission import submit_job
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec
from tests.support.gridengine_values import define_attributes, give_random_values, random_requests


def test_sql_misfits_equal_the_reference_evaluator(database: Database) -> None:
    rng = random.Random(6)
    with database.transaction() as session:
        define_attributes(session)
        set_values(session, Target("global"), "complex_values", {"rank_gt": "0.5"})
        for index in range(12):
            worker, _ = upsert_worker(
                session,
                WorkerSpec(
                    name=f"h{index}",
                    queues=tuple(QueueSpec(f"q{n}", rng.randint(1, 2)) for n in range(2)),
                ),
            )
            give_random_values(session, rng, worker)
        jobs = [
            submit_job(session, JobSpec(hard=random_requests(rng)), submitter="t")
            for _ in range(40)
        ]
        session.flush()
        table = load_table(session)
        state = load_state(session, table)
        workers = session.scalars(select(Worker)).all()
        compared = kept = 0
        for job in jobs:
            category_id = job.category_id
            category = session.get(Category, category_id)
            assert category is not None
            hard, soft = category_lists(table, category.hard, category.soft)
            for worker in workers:
                sql_keeps = bool(
                    session.scalar(select(fits(category_id, worker.id, worker.generation)))
                )
                oracle = any(
                    state.evaluate(slot, hard, soft).fits for slot in state.queue_order([worker.id])
                )
                assert sql_keeps is oracle, (category.hard, worker.name)
                compared += 1
                kept += oracle
        # The generator must exercise both outcomes.
        assert compared == 40 * 12 and 0 < kept < compared
