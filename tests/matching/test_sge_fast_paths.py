"""The fast paths of the Grid Engine engine (issue 6, speed) decide as the slow ones did,
on both databases:

* the misfit rows a *changed worker* gets (worker scope, app/matching/complex_sql.py) agree
  with the reference evaluator, as the rows of a new category do (the oracle test in
  test_sge_sql_oracle.py sets every value before submitting, so it only sees the category
  scope);
* a scheduling run's batched bookings (app/matching/run_bookings.py) leave the books
  consistent: used slots and consumable usage are the sums of the allocations and job
  bookings, every dispatched job runs on the worker of its master queue;
* a batched guard that no longer holds raises instead of overbooking.
"""

from __future__ import annotations

import random

import pytest
from sqlalchemy import func, select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import (
    Allocation,
    Category,
    ConsumableUsage,
    Job,
    JobBooking,
    JobState,
    QueueInstance,
    Worker,
)
from app.matching.complex_dispatch import category_lists, load_state
from app.matching.complex_sql import Scope
from app.matching.complex_table import load_table
from app.matching.complex_values import Target, set_values
from app.matching.errors import ConflictError
from app.matching.misfits import fits
from app.matching.requests import JobSpec
from app.matching.run_bookings import RunBookings
from app.matching.schedule import schedule
from app.matching.submission import submit_job
from app.matching.workers import QueueSpec, WorkerSpec, upsert_worker
from tests.matching.test_sge_sql_oracle import PATTERNS, _attributes, give_random_values


def _random_requests(rng: random.Random) -> str:
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
    return ",".join(items)


def test_a_changed_worker_gets_the_misfit_rows_the_evaluator_decides(
    database: Database,
) -> None:
    rng = random.Random(61)
    with database.transaction() as session:
        _attributes(session)
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
            submit_job(session, JobSpec(hard=_random_requests(rng)), submitter="t")
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


def _cluster(session, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    _attributes(session)
    set_values(session, Target("global"), "complex_values", {"lic": "7"})
    for index in range(4):
        worker, _ = upsert_worker(
            session,
            WorkerSpec(name=f"h{index}", queues=(QueueSpec("a", 2), QueueSpec("b", 1))),
        )
        set_values(session, Target("host", worker.id), "complex_values", {"lic": "3"})
    for _ in range(40):
        hard = rng.choice(["lic=1", "lic=2", "rle=1", "lic=0"])
        submit_job(
            session,
            JobSpec(hard=hard, priority=rng.randint(0, 3)),
            submitter="t",
        )


def test_a_scheduling_run_leaves_consistent_books(database: Database) -> None:
    with database.transaction() as session:
        _cluster(session, random.Random(62))
    with database.transaction() as session:
        report = schedule(session)
    assert 0 < report.dispatched < 40
    with database.transaction() as session:
        running = session.scalars(select(Job).where(Job.state == JobState.RUNNING)).all()
        assert len(running) == report.dispatched
        for job in running:
            allocations = session.scalars(
                select(Allocation).where(Allocation.job_id == job.id)
            ).all()
            assert sum(a.slots for a in allocations) == job.slots == 1
            qi = session.get(QueueInstance, allocations[0].queue_instance_id)
            assert qi is not None and qi.worker_id == job.worker_id
            assert job.started_at is not None
        for qi in session.scalars(select(QueueInstance)):
            booked = session.scalar(
                select(func.coalesce(func.sum(Allocation.slots), 0)).where(
                    Allocation.queue_instance_id == qi.id
                )
            )
            assert qi.used_slots == booked <= qi.slots
        for usage in session.scalars(select(ConsumableUsage)):
            booked = session.scalar(
                select(func.coalesce(func.sum(JobBooking.amount), 0.0)).where(
                    JobBooking.usage_id == usage.id
                )
            )
            assert usage.used == booked <= usage.capacity
        # The global lic=7 is the binding limit: the run books it to the full.
        total = session.scalar(
            select(ConsumableUsage.used).where(ConsumableUsage.level == "global")
        )
        assert total == 7.0


def test_a_batched_guard_that_fails_raises_instead_of_overbooking(database: Database) -> None:
    with database.transaction() as session:
        worker, _ = upsert_worker(session, WorkerSpec(name="h0", queues=(QueueSpec("a", 1),)))
        qi_id = worker.queue_instances[0].id
    with pytest.raises(ConflictError), database.transaction() as session:
        RunBookings(slots={qi_id: 2}).write(session)
    with database.transaction() as session:
        job = submit_job(session, JobSpec(), submitter="t")
        job.state = JobState.CANCELLED
    with pytest.raises(ConflictError), database.transaction() as session:
        RunBookings(
            started=[
                {
                    "job_key": job.id,
                    "new_worker": worker.id,
                    "new_slots": 1,
                    "new_started": utcnow(),
                }
            ]
        ).write(session)
    with database.transaction() as session:
        assert session.scalar(select(QueueInstance.used_slots)) == 0
        assert session.scalar(select(Job.state)) is JobState.CANCELLED
