"""Leases: a running job belongs to its worker for as long as the worker is heard from.

A worker is heard from whenever it pulls, finishes or heartbeats (``workers.last_seen``).
Being heard from is also what keeps a worker out of the ``unknown`` state
(app/matching/liveness.py), on a clock of its own: marking a worker unknown takes none of
its jobs.
When it has been silent for longer than the lease, each of its running jobs frees what it
booked and goes back to waiting, or fails once it has used up its attempts. Both outcomes
are recorded in the job's history.

A job the scheduler placed on a worker that has not pulled it yet (``awaiting_pickup``,
app/matching/dispatch/record.py) holds its lease from the placement (``started_at``)
instead: the worker's heartbeats say nothing about a job it does not know of, and a worker
that never pulls must not keep it (issue 22). The placement counted an attempt, so a job
placed again and again on a worker that never takes it ends at the attempts limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Job, JobEventKind, JobState, Worker
from app.matching import announce, domain_events, history, liveness
from app.matching.dispatch.pull import release_allocations, wait_again
from app.matching.late_reports import LEASE_EXPIRED
from app.matching.locks import worker_by_name
from app.words import plural


@dataclass(frozen=True)
class ExpiredLease:
    job_id: int
    worker: str
    outcome: JobState


def expire_leases(
    session: Session, *, lease: timedelta, max_attempts: int, now: datetime | None = None
) -> list[ExpiredLease]:
    """Requeue (or fail) the running jobs of workers silent for longer than ``lease``."""
    now = now or utcnow()
    deadline = now - lease
    stale = session.execute(
        select(Job.id, Worker.id)
        .join(Worker, Worker.id == Job.worker_id)
        .where(Job.state == JobState.RUNNING, _lease_ran_out(deadline))
        .order_by(Worker.id, Job.id)
    ).all()
    expired: list[ExpiredLease] = []
    for job_id, worker_id in stale:
        # Lock order as everywhere: worker, then job; then re-check under the locks, since
        # the worker may have spoken or finished the job meanwhile.
        worker = session.get(Worker, worker_id, with_for_update=True)
        job = session.get(Job, job_id, with_for_update=True)
        if worker is None or job is None or job.state is not JobState.RUNNING:
            continue
        if job.worker_id != worker.id or not _expired(worker, job, deadline):
            continue
        announce.rooms_changed(session, [worker.id])
        release_allocations(session, job)
        detail = f"{LEASE_EXPIRED}: {_why(worker, job)}"
        job.awaiting_pickup = False
        if job.attempts >= max_attempts:
            job.state = JobState.FAILED
            job.failure_reason = f"{detail}; {plural(job.attempts, 'attempt')} used"
            job.ended_at = now
            history.record(
                session,
                job,
                JobEventKind.FAILED,
                worker=worker.name,
                detail=detail,
                cause=domain_events.LEASE_EXPIRED,
            )
        else:
            wait_again(
                session,
                job,
                JobEventKind.REQUEUED,
                worker=worker.name,
                detail=detail,
                cause=domain_events.LEASE_EXPIRED,
            )
        expired.append(ExpiredLease(job.id, worker.name, job.state))
    session.flush()
    return expired


def _lease_ran_out(deadline: datetime) -> ColumnElement[bool]:
    """The job's lease ran out by ``deadline`` (SQL over a joined Job and Worker)."""
    worker_silent = Worker.last_seen.is_(None) | (Worker.last_seen < deadline)
    return or_(
        and_(Job.awaiting_pickup.is_(True), Job.started_at < deadline),
        and_(Job.awaiting_pickup.is_(False), worker_silent),
    )


def _expired(worker: Worker, job: Job, deadline: datetime) -> bool:
    """:func:`_lease_ran_out` in Python, re-checked under the locks."""
    if job.awaiting_pickup:
        return job.started_at is None or job.started_at < deadline
    return worker.last_seen is None or worker.last_seen < deadline


def _why(worker: Worker, job: Job) -> str:
    if job.awaiting_pickup:
        placed = "" if job.started_at is None else f" at {job.started_at.isoformat()}"
        return f"placed on {worker.name} by the scheduler{placed} and never picked up"
    silent = "never" if worker.last_seen is None else worker.last_seen.isoformat()
    return f"worker {worker.name} last heard from {silent}"


def heartbeat(session: Session, worker_name: str) -> Worker:
    """The worker is alive: its lease on its running jobs is renewed (and an unknown
    worker is active again)."""
    worker = worker_by_name(session, worker_name, lock=True)
    liveness.heard_from(session, worker)
    session.flush()
    return worker
