"""A cluster of eight inventory nodes whose ranks run against their ids, the job shapes
placed on it, and the rows a placement writes: shared by the allocation tests that compare
a fast path with the path it replaces (tests/matching/allocation/test_allocate.py,
test_inventory.py, test_book_pg.py and tests/matching/dispatch/test_finish_pg.py).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import (
    Allocation,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Job,
    JobEvent,
    QueueInstance,
    Worker,
    WorkerInventory,
)
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.allocation.allocator import Policy
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

NODE = "node/[socket=2/[core=4;gpu=1];memory=16{unit:GB}]"


NODES = 8


SHAPES = (
    "slot/core=2",
    "slot/core=3",
    "slot/[core=2;gpu=1]",
    "slot/socket",
    "slot/node",
    "slot=2/node",
    "node=2/slot/[core=1;memory=2{unit:GB}]",
    "node/socket=2/slot/core=1",
    "slot/[core=3;memory=4{unit:GB}]",
    "slot=3/[core=1;gpu=1]",
    "node=3/slot/core=2",
)


def build_cluster(database: Database) -> None:
    """Ranks against the ids (n0 has the highest), so an order by id would differ."""
    with database.transaction() as session:
        for index in range(NODES):
            workers.upsert_worker(
                session,
                WorkerSpec(name=f"n{index}", rank=NODES - index, slots=16, inventory=NODE),
            )


def submit_shape(database: Database, shape: str) -> int:
    """Submit a job asking for ``shape`` (RFC 14 jobspec) in its own transaction; its id."""
    with database.transaction() as session:
        return submission.submit_job(session, JobSpec(shape=shape), submitter="t").id


def fragment(
    database: Database, rng: random.Random, jobs: int, policy: Policy = "first"
) -> list[tuple[int, str]]:
    """Allocate random jobs and finish some of them: the running ones."""
    running: list[tuple[int, str]] = []
    for _ in range(jobs):
        job_id = submit_shape(database, rng.choice(SHAPES))
        try:
            with database.transaction() as session:
                job = scheduling.schedule_job(session, job_id, policy)
                leader = session.scalar(select(Worker.name).where(Worker.id == job.worker_id))
                assert leader is not None
            running.append((job_id, leader))
        except ConflictError:
            with database.transaction() as session:
                submission.cancel_job(session, job_id)
        if running and rng.random() < 0.3:
            job_id, leader = running.pop(rng.randrange(len(running)))
            with database.transaction() as session:
                dispatch.finish(session, job_id, leader, "finished")
    return running


def touched_rows(session: Session) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the writes touch, without timestamps and generated ids."""
    session.flush()
    v, c, b = InventoryVertex, InventoryCount, InventoryBooking
    return {
        "vertices": list(session.execute(select(v.id, v.held_by, v.shared, v.used).order_by(v.id))),
        "counts": list(
            session.execute(
                select(c.worker_id, c.type, c.unit, c.free).order_by(c.worker_id, c.type, c.unit)
            )
        ),
        "untouched": list(
            session.execute(
                select(WorkerInventory.worker_id, WorkerInventory.untouched).order_by(
                    WorkerInventory.worker_id
                )
            )
        ),
        "bookings": sorted(
            session.execute(
                select(
                    b.job_id, b.vertex_id, b.worker_id, b.mode, b.amount, b.released_at.is_(None)
                )
            )
        ),
        "allocations": sorted(
            session.execute(
                select(
                    Allocation.job_id,
                    Allocation.queue_instance_id,
                    Allocation.slots,
                    Allocation.released_at.is_(None),
                )
            )
        ),
        "slots": list(
            session.execute(
                select(QueueInstance.id, QueueInstance.used_slots).order_by(QueueInstance.id)
            )
        ),
        "jobs": list(
            session.execute(
                select(
                    Job.id,
                    Job.state,
                    Job.worker_id,
                    Job.exit_code,
                    Job.output,
                    Job.failure_reason,
                    Job.ended_at.is_(None),
                ).order_by(Job.id)
            )
        ),
        "events": list(
            session.execute(
                select(JobEvent.job_id, JobEvent.kind, JobEvent.worker, JobEvent.detail).order_by(
                    JobEvent.id
                )
            )
        ),
    }


def skip_unless_postgresql(backend: str) -> None:
    """Skip the calling test on SQLite: the paths it compares exist on PostgreSQL only."""
    if backend != "postgresql":
        pytest.skip("data-modifying CTEs: PostgreSQL only")
