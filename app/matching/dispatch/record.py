"""A dispatch, recorded the same way whoever started the job (issue 22).

A job starts on a worker in two ways: the worker pulls it (app/matching/dispatch/pull.py,
the Grid Engine pull), or the scheduler places it (POST /v1/schedule,
app/matching/gridengine/run.py; POST /v1/jobs/{id}/allocate,
app/matching/allocation/allocate.py). Either way it is one attempt and one ``dispatched``
event naming the worker; :func:`record_dispatches` writes those events for every path
(PostgreSQL's one-statement pulls write the same row inside their statement).

A placement also marks the job ``awaiting_pickup``: its worker did not ask for it, so its
next pull delivers it (:func:`deliver_placed`) before it looks for new work, without
counting another attempt. Until then the lease runs from the placement
(app/matching/leases.py): a worker that never pulls does not keep the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Insert,
    Select,
    String,
    bindparam,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session

from app.db.models import Job, JobEventKind, JobState
from app.db.tables import JOB_EVENTS, JOBS, WORKERS
from app.matching import domain_events

#: What the ``dispatched`` event of a placement says besides the attempt.
PLACED_BY_SCHEDULER = "placed by the scheduler"

#: Jobs per statement when a scheduling run records its placements (bound parameters
#: stay well below SQLite's and PostgreSQL's limits).
CHUNK = 1000


@dataclass(frozen=True)
class Dispatch:
    """One start of a job on a worker: its attempt number, and whether the scheduler
    placed it there (rather than the worker pulling it)."""

    job_id: int
    worker: str
    attempts: int
    placed: bool = False

    @property
    def detail(self) -> str:
        attempt = f"attempt {self.attempts}"
        return f"{attempt}, {PLACED_BY_SCHEDULER}" if self.placed else attempt


_RECORD = insert(JOB_EVENTS).values(
    job_id=bindparam("p_job_id"),
    kind=JobEventKind.DISPATCHED,
    worker=bindparam("p_worker"),
    detail=bindparam("p_detail"),
    at=bindparam("p_now"),
)


def dispatched_event_values(
    job_id: ColumnElement[int],
    worker_parameter: str,
    attempts: ColumnElement[int],
    at: ColumnElement[Any],
) -> Select[Any]:
    """The values of the ``dispatched`` event a one-statement pull writes inside its own
    statement, as :func:`record_dispatches` writes them (detail ``attempt N``); the caller
    narrows the SELECT to the jobs its statement starts."""
    return select(
        job_id,
        literal(JobEventKind.DISPATCHED, JOB_EVENTS.c.kind.type),
        bindparam(worker_parameter, type_=JOB_EVENTS.c.worker.type),
        literal("attempt ", String) + sql_cast(attempts, String),
        at,
    )


def dispatched_event_insert(values: Select[Any]) -> Insert:
    """INSERT ... SELECT of :func:`dispatched_event_values`."""
    return insert(JOB_EVENTS).from_select(["job_id", "kind", "worker", "detail", "at"], values)


def record_dispatches(session: Session, dispatches: Sequence[Dispatch], now: datetime) -> None:
    """The ``dispatched`` events of jobs just started, pulled or placed."""
    if not dispatches:
        return
    session.execute(
        _RECORD,
        [
            {
                "p_job_id": dispatch.job_id,
                "p_worker": dispatch.worker,
                "p_detail": dispatch.detail,
                "p_now": now,
            }
            for dispatch in dispatches
        ],
    )


_JOB_IDS: Any = bindparam("p_job_ids", expanding=True)
_PLACE = (
    update(JOBS)
    .where(JOBS.c.id.in_(_JOB_IDS), JOBS.c.state == JobState.RUNNING)
    .values(attempts=JOBS.c.attempts + 1, awaiting_pickup=True)
)
_PLACED = (
    select(JOBS.c.id, WORKERS.c.name, JOBS.c.attempts)
    .join(WORKERS, WORKERS.c.id == JOBS.c.worker_id)
    .where(JOBS.c.id.in_(_JOB_IDS))
    .order_by(JOBS.c.id)
)


def record_placements(session: Session, job_ids: Iterable[int], now: datetime) -> dict[int, int]:
    """The scheduler started these jobs (already running on their workers): each counts as
    a dispatch, waits for its worker's next pull, and gets its ``dispatched`` event. The
    attempts of each job afterwards. Core statements: callers holding Job objects tell
    them the new values (or expire them)."""
    attempts: dict[int, int] = {}
    wanted = sorted(job_ids)
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        session.execute(_PLACE, {"p_job_ids": chunk})
        rows = session.execute(_PLACED, {"p_job_ids": chunk}).all()
        placed = [Dispatch(job_id, worker, count, placed=True) for job_id, worker, count in rows]
        record_dispatches(session, placed, now)
        for dispatch in placed:
            domain_events.job_event(
                session,
                JobEventKind.DISPATCHED,
                dispatch.job_id,
                worker=dispatch.worker,
                detail=PLACED_BY_SCHEDULER,
            )
        attempts.update((job_id, count) for job_id, _worker, count in rows)
    return attempts


_NEXT_PLACED = (
    select(Job)
    .where(
        Job.worker_id == bindparam("p_worker_id"),
        Job.state == JobState.RUNNING,
        Job.awaiting_pickup.is_(True),
    )
    .order_by(Job.started_at, Job.id)
    .limit(1)
    .with_for_update()
)


def deliver_placed(session: Session, worker_id: int) -> Job | None:
    """The oldest job the scheduler placed on the worker that it has not received yet,
    now delivered (no new attempt: the placement counted it); None when there is none.
    The caller holds the worker's row lock, so two pulls cannot deliver the same job."""
    job = session.scalars(_NEXT_PLACED, {"p_worker_id": worker_id}).first()
    if job is None:
        return None
    job.awaiting_pickup = False
    session.flush()
    return job
