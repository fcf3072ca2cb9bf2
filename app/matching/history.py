"""A job's history: one row per change of state."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobEvent, JobEventKind
from app.matching import domain_events


def record(
    session: Session,
    job: Job,
    kind: JobEventKind,
    *,
    worker: str | None = None,
    detail: str | None = None,
    cause: str | None = None,
) -> None:
    """Add the history row, and log the change once it commits (``cause``: see
    :func:`app.matching.domain_events.job_event`)."""
    session.add(JobEvent(job_id=job.id, kind=kind, worker=worker, detail=detail))
    domain_events.job_event(session, kind, job.id, worker=worker, detail=detail, cause=cause)


def events(session: Session, job_id: int) -> list[JobEvent]:
    return list(
        session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id))
    )
