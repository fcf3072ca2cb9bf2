"""Reports of a job's end that reach the server when they no longer apply as they are.

Two cases are told apart from a plain refusal:

- A **resend**: the worker already ended the job with this outcome, but its reply was lost
  (the agent keeps unreported results in its spool and sends them again). The report is
  answered as the first one was, so a resend is safe.
- A **late report**: the worker held the job, lost it (its lease expired while the server
  or the network was away, or the job was cancelled) and reports its end afterwards. The
  job's state is not changed (it may be running elsewhere), but the report is kept in the
  job's history and the worker is told what happened instead of a bare "forbidden".

A worker that never held the job gets neither: the caller refuses it as before.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobEvent, JobEventKind, JobState, Worker
from app.matching import history
from app.matching.errors import ConflictError

#: How the lease sweeper's history events begin (app/matching/leases.py words them).
LEASE_EXPIRED = "lease expired"

_FINAL = {JobEventKind.FINISHED: JobState.FINISHED, JobEventKind.FAILED: JobState.FAILED}


class LateReportError(ConflictError):
    """A worker reported the end of a job it no longer holds: its lease expired (or the
    job was cancelled) before the report came. The report was recorded in the job's
    history, not applied; the attributes say what happened to the job instead."""

    def __init__(
        self,
        detail: str,
        *,
        job_id: int,
        lost_at: datetime,
        state: JobState,
        now_on: str | None,
    ) -> None:
        super().__init__(detail)
        self.job_id = job_id
        self.lost_at = lost_at
        self.state = state
        self.now_on = now_on


def resent_or_late(
    session: Session,
    job_id: int,
    worker_name: str,
    outcome: JobEventKind,
    exit_code: int | None,
) -> Job | None:
    """The job, when this report repeats the end the worker already reported; raise
    :class:`LateReportError` (after recording the report) when the worker held the job
    and lost it; None when neither holds (the caller refuses the report)."""
    worker = session.scalar(select(Worker).where(Worker.name == worker_name))
    job = session.get(Job, job_id)
    if worker is None or job is None:
        return None
    events = history.events(session, job_id)
    if _repeats_last_end(job, worker, events, outcome, exit_code):
        return job
    if not any(e.kind is JobEventKind.DISPATCHED and e.worker == worker_name for e in events):
        return None
    if job.state is JobState.RUNNING and job.worker_id == worker.id:
        return None  # still its own job: not late (e.g. a start racing the finish)
    lost = _how_it_was_lost(events, worker_name)
    if lost is None:
        return None  # the worker ended the job itself: another outcome is a plain conflict
    raise _record_late(session, job, worker_name, lost, outcome, exit_code)


def _repeats_last_end(
    job: Job,
    worker: Worker,
    events: list[JobEvent],
    outcome: JobEventKind,
    exit_code: int | None,
) -> bool:
    ends = [e for e in events if e.kind in _FINAL]
    if not ends or job.worker_id != worker.id or job.state is not _FINAL[outcome]:
        return False
    last = ends[-1]
    by_lease = last.detail is not None and last.detail.startswith(LEASE_EXPIRED)
    return (
        last.kind is outcome
        and last.worker == worker.name
        and not by_lease
        and job.exit_code == exit_code
    )


def _record_late(
    session: Session,
    job: Job,
    worker_name: str,
    lost: JobEvent,
    outcome: JobEventKind,
    exit_code: int | None,
) -> LateReportError:
    now_on = None
    if job.state is JobState.RUNNING and job.worker_id is not None:
        now_on = session.scalar(select(Worker.name).where(Worker.id == job.worker_id))
    since = f" at {lost.at.isoformat()}"
    why = _loss_words(lost)
    where = f" on worker {now_on}" if now_on is not None else ""
    code = "" if exit_code is None else f" (exit status {exit_code})"
    detail = (
        f"worker {worker_name} reported job {job.id} {outcome.value}{code}, but {why}{since}; "
        f"the job is now {job.state.value}{where}. The report was recorded in the job's "
        "history and not applied."
    )
    history.record(session, job, JobEventKind.LATE_REPORT, worker=worker_name, detail=detail)
    session.flush()
    return LateReportError(
        detail,
        job_id=job.id,
        lost_at=lost.at,
        state=job.state,
        now_on=now_on,
    )


def _how_it_was_lost(events: list[JobEvent], worker_name: str) -> JobEvent | None:
    """The last event that took the job from the worker: a lease expiry (requeue or
    failure) naming it, or a cancellation after its last dispatch."""
    dispatched = max(
        i
        for i, e in enumerate(events)
        if e.kind is JobEventKind.DISPATCHED and e.worker == worker_name
    )
    for event in events[dispatched + 1 :]:
        by_lease = event.detail is not None and event.detail.startswith(LEASE_EXPIRED)
        took = event.kind in (JobEventKind.REQUEUED, JobEventKind.RETURNED) or (
            event.kind is JobEventKind.FAILED and by_lease  # not the worker's own report
        )
        if took and event.worker == worker_name:
            return event
        if event.kind is JobEventKind.CANCELLED:
            return event
    return None


def _loss_words(event: JobEvent) -> str:
    if event.kind is JobEventKind.CANCELLED:
        return "the job was cancelled"
    if event.kind is JobEventKind.RETURNED:
        return "the job had been returned to the queue"
    if event.kind is JobEventKind.REQUEUED:
        return "its lease expired and the job was requeued"
    return "its lease expired and the job failed"
