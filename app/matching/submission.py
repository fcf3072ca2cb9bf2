"""Submitting, reading and cancelling jobs."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Job, JobState
from app.matching.categories import any_worker_fits, get_or_create_category
from app.matching.dispatch import release_allocations
from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.tag_rows import parse_resources

NO_SUITABLE_WORKER = "No suitable worker found"
#: Priorities are bounded so that they fit a 32-bit column on every database.
PRIORITY_RANGE = (-1_000_000, 1_000_000)


@dataclass(frozen=True)
class JobSpec:
    resources: str = ""
    priority: int = 0
    slots: int = 1


def validate_job(spec: JobSpec) -> None:
    """Raise InvalidFieldError for the first invalid field; parses every notation."""
    parse_resources(spec.resources)
    if spec.slots < 1:
        raise InvalidFieldError("slots", "a job needs at least one slot")
    low, high = PRIORITY_RANGE
    if not low <= spec.priority <= high:
        raise InvalidFieldError("priority", f"must be between {low} and {high}")


def submit_job(session: Session, spec: JobSpec, *, submitter: str) -> Job:
    """Store a job: waiting when some registered worker could ever run it, otherwise
    failed at once with "No suitable worker found" (debusine's rule, seed 004)."""
    validate_job(spec)
    category = get_or_create_category(session, parse_resources(spec.resources), spec.slots)
    job = Job(
        resources=spec.resources,
        priority=spec.priority,
        slots=spec.slots,
        category_id=category.id,
        submitter=submitter,
        submitted_at=utcnow(),
    )
    if not any_worker_fits(session, category.id):
        job.state = JobState.FAILED
        job.failure_reason = NO_SUITABLE_WORKER
        job.ended_at = job.submitted_at
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, job_id: int, *, lock: bool = False) -> Job:
    """The job; ``lock`` takes its row lock first, for a change of state."""
    job = session.get(Job, job_id, with_for_update=lock)
    if job is None:
        raise NotFoundError(f"no job with id {job_id}")
    return job


def list_jobs(
    session: Session,
    *,
    state: JobState | None,
    category_id: int | None,
    limit: int,
    offset: int,
) -> list[Job]:
    query = select(Job).order_by(Job.id)
    if state is not None:
        query = query.where(Job.state == state)
    if category_id is not None:
        query = query.where(Job.category_id == category_id)
    return list(session.scalars(query.limit(limit).offset(offset)))


def cancel_job(session: Session, job_id: int) -> Job:
    """Cancel a waiting or running job; a running job's slots are freed at once."""
    job = get_job(session, job_id, lock=True)
    if job.state not in (JobState.WAITING, JobState.RUNNING):
        raise ConflictError(
            f"job {job_id} is {job.state.value}; only waiting or running jobs can be cancelled"
        )
    if job.state is JobState.RUNNING:
        release_allocations(session, job)
    job.state = JobState.CANCELLED
    job.ended_at = utcnow()
    session.flush()
    return job
