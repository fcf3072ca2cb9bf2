"""The statements that claim a pulled job, book its slots and start it, one at a time
(the general way of a pull, and the SQLite way of a plain one). Built once with bind
parameters: building them anew for every pull cost more Python time than PostgreSQL spent
running them, and they are Core statements on the tables, as the ORM's bulk UPDATE/INSERT
machinery adds nothing a pull needs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Update,
    bindparam,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.db import dialect
from app.db.base import utcnow
from app.db.models import Category, Job, JobState
from app.db.tables import ALLOCATIONS, JOBS
from app.matching.dispatch.record import Dispatch, record_dispatches
from app.matching.slots import WAITING, book_room_statement

#: What a claim writes: the job runs on the puller, one attempt more.
CLAIM_VALUES: dict[str, Any] = {
    "state": JobState.RUNNING,
    "worker_id": bindparam("p_worker_id"),
    "started_at": bindparam("p_now"),
    "attempts": JOBS.c.attempts + 1,
    "awaiting_pickup": False,
}


def still_waiting() -> ColumnElement[bool]:
    """The job still waits, for a statement that has found it by id (a claim of a head
    read just before): compared through ``coalesce``, so that no plan can find jobs by
    their state instead.

    Compared plainly, the state offers the planner ``ix_jobs_state_id`` and the partial
    indexes of waiting jobs; on a jobs table never ANALYZEd (a new deployment, a burst
    ahead of autovacuum), each looked one row long, and the take's plan read every
    waiting job on each pull, joined to the eight heads (issue 38: 870 index rows per
    scan in a 3,000-job drain, PostgreSQL's CPU per job 2.9 ms). ``state`` is NOT NULL,
    so the comparison matches what the plain one matches."""
    waits: ColumnElement[bool] = func.coalesce(JOBS.c.state, literal_column("''")) == WAITING
    return waits


def _claim(skip_locked: bool) -> Update:
    claim = update(JOBS).where(JOBS.c.id == bindparam("p_job_id"), JOBS.c.state == WAITING)
    if skip_locked:
        # The job's lock without waiting: a concurrent pull holding it makes this one
        # move on to the next head (SQLite's BEGIN IMMEDIATE already serialises pulls).
        claim = claim.where(
            JOBS.c.id.in_(
                select(JOBS.c.id)
                .where(JOBS.c.id == bindparam("p_job_id"), JOBS.c.state == WAITING)
                .with_for_update(skip_locked=True)
            )
        )
    return claim.values(**CLAIM_VALUES).returning(*JOBS.c)


#: A waiting job claimed for the puller, by whether the database can skip locked rows.
CLAIM = {skip_locked: _claim(skip_locked) for skip_locked in (False, True)}
#: The same, loading the claimed row as a Job (built once: building it costs more than
#: running it).
CLAIM_JOB = {key: select(Job).from_statement(claim) for key, claim in CLAIM.items()}

#: A claimed job put back as it was, when its booking found no room after all.
UNCLAIM = (
    update(JOBS)
    .where(JOBS.c.id == bindparam("p_job_id"))
    .values(
        state=JobState.WAITING,
        worker_id=None,
        started_at=None,
        attempts=JOBS.c.attempts - 1,
    )
)

_SLOTS: Any = bindparam("p_slots")


_BOOK = book_room_statement(_SLOTS)


def book_first_room(session: Session, worker_id: int, slots: int) -> int | None:
    """Book ``slots`` on the worker's first queue instance (in queue order) with room:
    its id, or None when none has room. One conditional UPDATE."""
    booked: int | None = session.scalar(_BOOK, {"p_worker_id": worker_id, "p_slots": slots})
    return booked


_ALLOCATE = insert(ALLOCATIONS).values(
    job_id=bindparam("p_job_id"),
    queue_instance_id=bindparam("p_queue_instance_id"),
    slots=bindparam("p_slots"),
    allocated_at=bindparam("p_now"),
)


def _claim_with_category(skip_locked: bool) -> Select[Job, Category]:
    claim = (
        select(Job, Category)
        .join(Category, Category.id == Job.category_id)
        .where(Job.id == bindparam("p_job_id"), Job.state == WAITING)
    )
    if skip_locked:
        claim = claim.with_for_update(of=Job, skip_locked=True)
    return claim


_CLAIM_WITH_CATEGORY = {key: _claim_with_category(key) for key in (False, True)}


def claim_with_category(session: Session, job_id: int) -> tuple[Job, Category] | None:
    """Lock a waiting job (skipping it when a concurrent pull holds it) and read its
    category in the same statement; None when another pull holds or took it."""
    skip_locked = dialect.supports_skip_locked(session.connection())
    row = session.execute(_CLAIM_WITH_CATEGORY[skip_locked], {"p_job_id": job_id}).one_or_none()
    return None if row is None else (row[0], row[1])


def start_statement(attempts: ColumnElement[int]) -> Update:
    """The UPDATE that marks a job running on a worker (binds ``p_job_id``,
    ``p_worker_id``, ``p_slots``, ``p_now``). ``attempts`` is the one part the pulls
    differ in: :func:`start` binds the count it already knows from the Job object, the
    Core Grid Engine pull, which has no object, counts up in SQL and reads the row back."""
    return (
        update(JOBS)
        .where(JOBS.c.id == bindparam("p_job_id"))
        .values(
            state=JobState.RUNNING,
            worker_id=bindparam("p_worker_id"),
            slots=bindparam("p_slots"),
            started_at=bindparam("p_now"),
            attempts=attempts,
            # A pulled job is in its worker's hands (app/matching/dispatch/record.py).
            awaiting_pickup=False,
        )
    )


_START = start_statement(bindparam("p_attempts"))


def start(session: Session, job: Job, worker_id: int, worker_name: str) -> Job:
    """Mark a claimed and booked job running on the worker and record it, in two Core
    statements; the Job object is told the new values without another flush."""
    now = utcnow()
    attempts = job.attempts + 1
    slots = job.slots
    # The object first: values set on it by the booking (slots, worker) would otherwise
    # be flushed by an UPDATE of their own before this statement.
    for key, value in (
        ("state", JobState.RUNNING),
        ("worker_id", worker_id),
        ("slots", slots),
        ("started_at", now),
        ("attempts", attempts),
        ("awaiting_pickup", False),
    ):
        set_committed_value(job, key, value)
    session.execute(
        _START,
        {
            "p_job_id": job.id,
            "p_worker_id": worker_id,
            "p_slots": slots,
            "p_now": now,
            "p_attempts": attempts,
        },
    )
    record_dispatches(session, [Dispatch(job.id, worker_name, attempts)], now)
    return job


def allocate_slots(
    session: Session, job_id: int, queue_instance_id: int, slots: int, now: datetime
) -> None:
    """The allocation row of slots booked on a queue instance."""
    session.execute(
        _ALLOCATE,
        {
            "p_job_id": job_id,
            "p_queue_instance_id": queue_instance_id,
            "p_slots": slots,
            "p_now": now,
        },
    )
