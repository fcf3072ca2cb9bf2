"""A job's history: one row per change of state."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobEvent, JobEventKind


def record(
    session: Session,
    job: Job,
    kind: JobEventKind,
    *,
    worker: str | None = None,
    detail: str | None = None,
) -> None:
    session.add(JobEvent(job_id=job.id, kind=kind, worker=worker, detail=detail))


def events(session: Session, job_id: int) -> list[JobEvent]:
    return list(
        session.scalars(select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id))
    )
