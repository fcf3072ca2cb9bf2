"""Submitting, reading and cancelling jobs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Category, Job, JobEventKind, JobState, Task
from app.matching import announce, history
from app.matching.categories import any_worker_fits, get_or_create_category
from app.matching.debusine.registry import get_task
from app.matching.demand.templates import template_for
from app.matching.dispatch.pull import booked_workers, lock_workers, release_allocations
from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.gridengine.groups import check_project
from app.matching.gridengine.parallel import check_pe_exists
from app.matching.gridengine.table import load_table
from app.matching.gridengine.verify import (
    NO_SUITABLE_QUEUES,
    check_queues_exist,
    runs_in_empty_cluster,
)
from app.matching.ordering import usage as fair_share_usage
from app.matching.requests import JobSpec, ParsedRequest, parse_request

__all__ = [
    "NO_SUITABLE_WORKER",
    "JobSpec",
    "Prepared",
    "cancel_job",
    "fails_at_once",
    "get_job",
    "job_values",
    "list_jobs",
    "prepare",
    "submit_job",
]

NO_SUITABLE_WORKER = "No suitable worker found"
#: qsub -w levels a submission may give (``p`` and ``v`` print a report instead of
#: submitting: not a submission).
VERIFY_LEVELS = ("e", "w", "n")


@dataclass(frozen=True)
class Prepared:
    """A request checked and categorised: what every job of that request shares."""

    request: ParsedRequest
    project: str | None
    task: Task | None
    category: Category


def prepare(session: Session, spec: JobSpec, *, submitter: str) -> Prepared:
    """Grid Engine's submission checks, then the category: every check of a submission
    before anything of the job is stored (it may create the category). Refuses a job
    (InvalidFieldError): a ``-P`` project that does not exist, a queue list item that
    names no queue instance, and with ``-w e`` a job that could run nowhere
    (app/matching/gridengine/verify.py)."""
    request = parse_request(spec, load_table(session))
    if spec.verify not in VERIFY_LEVELS:
        raise InvalidFieldError(
            "verify", f"unknown qsub -w level {spec.verify!r}; expected one of e, w, n"
        )
    if request.pe is not None:
        check_pe_exists(session, request.pe)
    project = check_project(session, spec.project)
    check_queues_exist(session, request.queues)
    task = get_task(session, spec.task, field="task") if spec.task is not None else None
    category = get_or_create_category(session, request, task.id if task else None)
    if spec.verify == "e" and not runs_in_empty_cluster(
        session, category, user=submitter, project=project
    ):
        raise InvalidFieldError("verify", NO_SUITABLE_QUEUES)
    return Prepared(request, project, task, category)


def fails_at_once(session: Session, prepared: Prepared) -> bool:
    """Whether the job fails at submission with "No suitable worker found": no
    registered worker could ever run it (debusine's rule), and no worker template could
    either (issue 40: a job that a new worker of a template would fit waits for one).
    Grid Engine keeps a job that nothing can run pending, even one whose attribute is
    attached to no object (docs/notations/gridengine.md)."""
    if prepared.request.grid_engine:
        return False
    if any_worker_fits(session, prepared.category.id, prepared.task):
        return False
    return template_for(session, prepared.category.id) is None


def job_values(
    spec: JobSpec, prepared: Prepared, *, submitter: str, submitted_at: datetime, failed: bool
) -> dict[str, Any]:
    """The columns of a new job of ``spec`` (by attribute name, for the ORM and for a
    Core INSERT alike)."""
    request = prepared.request
    return {
        "resources": spec.resources,
        "constraint": json.dumps(spec.constraint) if spec.constraint is not None else spec.requires,
        "constraint_syntax": "rfc31"
        if spec.constraint is not None
        else "rfc35"
        if spec.requires is not None
        else None,
        "shape": spec.shape,
        "jobspec": json.dumps(spec.jobspec) if spec.jobspec is not None else None,
        "priority": spec.priority,
        "slots": request.pe_min if request.pe is not None else spec.slots,
        "hard": spec.hard or None,
        "soft": spec.soft or None,
        "pe": spec.pe,
        "pe_slots": spec.pe_slots,
        "queue_list": spec.queue_list or None,
        "master_queue_list": spec.master_queue_list or None,
        "soft_queue_list": spec.soft_queue_list or None,
        "project": prepared.project,
        "category_id": prepared.category.id,
        "submitter": submitter,
        "submitted_at": submitted_at,
        "task": spec.task,
        "command": json.dumps(spec.command) if spec.command is not None else None,
        "timeout": spec.timeout,
        "state": JobState.FAILED if failed else JobState.WAITING,
        "failure_reason": NO_SUITABLE_WORKER if failed else None,
        "ended_at": submitted_at if failed else None,
    }


def submit_job(session: Session, spec: JobSpec, *, submitter: str) -> Job:
    """Store a job: waiting when some registered worker could ever run it, otherwise
    failed at once with "No suitable worker found" (debusine's rule, debusine issue #8). A job
    with Grid Engine requests (hard/soft ``-l``, ``-q``, ``-pe``) waits in either case. Grid
    Engine's submission checks refuse a job (nothing stored): see :func:`prepare`."""
    prepared = prepare(session, spec, submitter=submitter)
    failed = fails_at_once(session, prepared)
    job = Job(
        **job_values(spec, prepared, submitter=submitter, submitted_at=utcnow(), failed=failed)
    )
    session.add(job)
    session.flush()
    fair_share_usage.if_fair_share(session, [submitter])
    history.record(session, job, JobEventKind.SUBMITTED)
    if job.state is JobState.FAILED:
        history.record(session, job, JobEventKind.FAILED, detail=NO_SUITABLE_WORKER)
    else:
        announce.job_waits(session, prepared.category.id, job.id)
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
    submitter: str | None = None,
    limit: int,
    offset: int,
) -> list[Job]:
    """Jobs in id order, filtered (by state, category and submitter) before the page is
    cut: a submitter's page holds its own jobs only, and as many as the limit allows."""
    query = select(Job).order_by(Job.id)
    if submitter is not None:
        query = query.where(Job.submitter == submitter)
    if state is not None:
        query = query.where(Job.state == state)
    if category_id is not None:
        query = query.where(Job.category_id == category_id)
    return list(session.scalars(query.limit(limit).offset(offset)))


#: Times cancel re-reads a job that started on a worker between its read and its lock.
LOCK_ATTEMPTS = 3


def _lock_for_cancel(session: Session, job_id: int) -> Job:
    """Lock the job for a change of state, and first, when it runs, its workers (the one it
    runs on and every one it holds vertices on, in id order): the lock order of every
    writer is workers -> job -> queue instances -> inventory rows (app/matching/dispatch/pull.py).
    The workers are known only from an unlocked read, so they are locked in a savepoint and
    the read repeated when the job moved meanwhile (a waiting job pulled or allocated);
    rolling back the savepoint drops the locks taken out of order."""
    for _ in range(LOCK_ATTEMPTS):
        seen = session.get(Job, job_id, populate_existing=True)
        if seen is None:
            raise NotFoundError(f"no job with id {job_id}")
        worker_ids: set[int] = set()
        if seen.state is JobState.RUNNING and seen.worker_id is not None:
            worker_ids = {seen.worker_id} | booked_workers(session, job_id)
        savepoint = session.begin_nested()
        lock_workers(session, worker_ids)
        job = session.get(Job, job_id, with_for_update=True, populate_existing=True)
        if job is None:
            savepoint.rollback()
            raise NotFoundError(f"no job with id {job_id}")
        if job.state is not JobState.RUNNING or (
            job.worker_id in worker_ids and booked_workers(session, job_id) <= worker_ids
        ):
            savepoint.commit()
            return job
        savepoint.rollback()
    raise ConflictError(f"job {job_id} keeps changing; retry the cancel")


def cancel_job(session: Session, job_id: int) -> Job:
    """Cancel a waiting or running job; a running job's slots and vertices are freed at
    once."""
    job = _lock_for_cancel(session, job_id)
    if job.state not in (JobState.WAITING, JobState.RUNNING):
        raise ConflictError(
            f"job {job_id} is {job.state.value}; only waiting or running jobs can be cancelled"
        )
    if job.state is JobState.RUNNING:
        announce.rooms_changed(session, {job.worker_id} | booked_workers(session, job_id))
        release_allocations(session, job)
    was_running = job.state is JobState.RUNNING
    job.state = JobState.CANCELLED
    job.ended_at = utcnow()
    history.record(session, job, JobEventKind.CANCELLED)
    session.flush()
    if was_running:
        fair_share_usage.book_job(session, job)
    return job
