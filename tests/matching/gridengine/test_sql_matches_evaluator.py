"""The SQL misfit cache decides as the reference evaluator does (app/notations/
complex_matching.py), on generated clusters with static values, on both databases: a
worker is kept exactly when some queue instance of it fits. Covers numbers with every
relop, strings with wildcards and expressions (the regex compilation on PostgreSQL ~ and
SQLite REGEXP), CSTRING folding, FORCED attributes, consumable defaults and unknown
attributes."""

from __future__ import annotations

import random

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import Category, Worker
from app.matching.complex_dispatch import category_lists, load_state
from app.matching.complex_table import create_attribute, definition_from_body, load_table
from app.matching.complex_values import Target, set_values
from app.matching.misfits import fits
from app.matching.requests import JobSpec
from app.matching.submission import submit_job
from app.matching.workers import QueueSpec, WorkerSpec, upsert_worker

ARCHES = ["lx-amd64", "lx-ia64", "sol-sparc64", "LX-AMD64", "darwin", "[linux"]
PATTERNS = [
    "lx*",
    "lx*&!*ia64",
    "sol*|darwin",
    "[ls]*64",
    "!lx*",
    "[linux|x]",
    "*-amd64",
    "lx-amd64",
]


def _attributes(session) -> None:  # type: ignore[no-untyped-def]
    for row in (
        {"name": "os", "shortcut": "os", "type": "CSTRING", "relop": "==", "default": "NONE"},
        {"name": "rank_le", "shortcut": "rle", "type": "INT", "relop": "<=", "default": "0"},
        {"name": "rank_gt", "shortcut": "rgt", "type": "DOUBLE", "relop": ">", "default": "0"},
        {"name": "rank_ne", "shortcut": "rne", "type": "INT", "relop": "!=", "default": "0"},
        {
            "name": "lic",
            "shortcut": "lic",
            "type": "INT",
            "relop": "<=",
            "consumable": "YES",
            "default": "1",
        },
        {
            "name": "key",
            "shortcut": "key",
            "type": "INT",
            "relop": "<=",
            "requestable": "FORCED",
            "default": "0",
        },
    ):
        create_attribute(
            session,
            definition_from_body({"requestable": "YES", "consumable": "NO", "urgency": 0, **row}),
        )


def give_random_values(session: Session, rng: random.Random, worker: Worker) -> None:
    """Host load and fixed values, and some queue-instance values, drawn from ``rng`` (the
    same draws in the same order for every caller, so each test's cluster stays fixed)."""
    host = Target("host", worker.id)
    set_values(session, host, "load_values", {"arch": rng.choice(ARCHES)})
    values = {"os": rng.choice(["Linux", "linux", "BSD"])}
    if rng.random() < 0.7:
        values["rank_le"] = str(rng.randint(1, 5))
    if rng.random() < 0.3:
        values["lic"] = str(rng.randint(0, 2))
    if rng.random() < 0.2:
        values["key"] = "1"
    set_values(session, host, "complex_values", values)
    for qi in worker.queue_instances:
        if rng.random() < 0.5:
            set_values(
                session,
                Target("queue_instance", worker.id, qi.id),
                "complex_values",
                {"rank_ne": str(rng.randint(1, 3)), "rank_le": str(rng.randint(1, 5))},
            )


def test_sql_misfits_equal_the_reference_evaluator(database: Database) -> None:
    rng = random.Random(6)
    with database.transaction() as session:
        _attributes(session)
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
        jobs = []
        for _ in range(40):
            items = [f"arch={rng.choice(PATTERNS)}"]
            for name, choices in (
                ("os", ["LINUX", "bsd", "l*"]),
                ("rle", ["1", "3", "6"]),
                ("rgt", ["0.25", "1"]),
                ("rne", ["1", "2"]),
                ("lic", ["0", "1", "3"]),
                ("key", ["1"]),
            ):
                if rng.random() < 0.4:
                    items.append(f"{name}={rng.choice(choices)}")
            jobs.append(submit_job(session, JobSpec(hard=",".join(items)), submitter="t"))
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
