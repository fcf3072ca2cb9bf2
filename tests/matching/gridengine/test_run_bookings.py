"""A scheduling run's batched bookings (app/matching/gridengine/run_bookings.py) leave the books
consistent on both databases (issue 6, speed): used slots and consumable usage are the
sums of the allocations and job bookings, every dispatched job runs on the worker of its
master queue; and a batched guard that no longer holds raises instead of overbooking.
"""

from __future__ import annotations

import random

import pytest
from sqlalchemy import func, select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Allocation, ConsumableUsage, Job, JobBooking, JobState, QueueInstance
from app.matching.errors import ConflictError
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.run import schedule
from app.matching.gridengine.run_bookings import RunBookings
from app.matching.gridengine.values import Target
from app.matching.requests import JobSpec
from app.matching.submission import submit_job
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec
from tests.support.gridengine_values import define_attributes


def _cluster(session, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    define_attributes(session)
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
