"""Leases: a running job belongs to its worker for as long as the worker is heard from.

A worker is heard from whenever it pulls, finishes or heartbeats (``workers.last_seen``).
When it has been silent for longer than the lease, each of its running jobs frees what it
booked and goes back to waiting, or fails once it has used up its attempts. Both outcomes
are recorded in the job's history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Job, JobEventKind, JobState, Worker
from app.matching import announce, history
from app.matching.dispatch.pull import release_allocations
from app.matching.late_reports import LEASE_EXPIRED
from app.matching.locks import worker_by_name


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
        .where(
            Job.state == JobState.RUNNING,
            (Worker.last_seen.is_(None)) | (Worker.last_seen < deadline),
        )
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
        if job.worker_id != worker.id or (
            worker.last_seen is not None and worker.last_seen >= deadline
        ):
            continue
        announce.rooms_changed(session, [worker.id])
        release_allocations(session, job)
        silent = "never" if worker.last_seen is None else worker.last_seen.isoformat()
        detail = f"{LEASE_EXPIRED}: worker {worker.name} last heard from {silent}"
        if job.attempts >= max_attempts:
            job.state = JobState.FAILED
            job.failure_reason = f"{detail}; {job.attempts} attempts used"
            job.ended_at = now
            history.record(session, job, JobEventKind.FAILED, worker=worker.name, detail=detail)
        else:
            job.state = JobState.WAITING
            job.worker_id = None
            job.started_at = None
            announce.job_waits(session, job.category_id)
            history.record(session, job, JobEventKind.REQUEUED, worker=worker.name, detail=detail)
        expired.append(ExpiredLease(job.id, worker.name, job.state))
    session.flush()
    return expired


def heartbeat(session: Session, worker_name: str) -> Worker:
    """The worker is alive: its lease on its running jobs is renewed."""
    worker = worker_by_name(session, worker_name, lock=True)
    worker.last_seen = utcnow()
    session.flush()
    return worker
