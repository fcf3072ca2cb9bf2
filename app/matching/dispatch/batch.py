"""A worker's batch pull: the ends of the jobs it ran, then up to N new jobs, in one
transaction (issue 38).

A busy worker finishes a job and asks for the next at once; a worker with N free slots
wants N jobs. One request instead of 2N saves the HTTP round trips and all but one
commit. Every report and every pull goes through the same functions as the single
finish and pull (:func:`.pull.finish`, :func:`.pull.pull_for`), so their rules hold
unchanged: a resent report is answered as the first, a report from a worker that lost the
job is recorded in the job's history (and said back as late, not raised: the pull goes
on), anything else a finish refuses refuses the whole request, naming the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.db.models import Job, JobState
from app.matching.allocation.allocator import Policy
from app.matching.dispatch.pull import finish, pull_for
from app.matching.dispatch.puller import Puller
from app.matching.errors import ConflictError, InvalidFieldError, MatchingError
from app.matching.late_reports import LateReportError

#: The most reports, and the most jobs, one batch may carry: a worker with more free
#: slots asks again. It bounds the time the worker's row lock is held.
MAX_BATCH = 256


@dataclass(frozen=True)
class EndReport:
    """How the worker says one of its jobs ended (a finish body and the job's id)."""

    job_id: int
    outcome: str
    reason: str | None = None
    exit_code: int | None = None
    output: str | None = None


@dataclass(frozen=True)
class Ended:
    """What became of one report: the job's state after it, and, for a report that came
    after the worker lost the job, the :class:`LateReportError` saying what happened."""

    job_id: int
    state: JobState
    late: LateReportError | None = None


@dataclass
class Batch:
    """What a batch pull did: its reports' results in their order, the jobs it started
    (best first), and the worker as its last pull read it (None when it pulled nothing)."""

    ended: list[Ended]
    jobs: list[Job]
    puller: Puller
    #: The ids among ``jobs`` of those the scheduler placed on the worker
    #: (app/matching/dispatch/record.py), delivered before any new work.
    placed: list[int] = field(default_factory=list)


def check_reports(reports: Sequence[EndReport]) -> None:
    """Refuse a batch that reports one job twice (which of the two would be its end?) or
    more reports than :data:`MAX_BATCH`; before any work."""
    if len(reports) > MAX_BATCH:
        raise InvalidFieldError("finished", f"at most {MAX_BATCH} reports per batch")
    seen: dict[int, int] = {}
    for index, report in enumerate(reports):
        first = seen.setdefault(report.job_id, index)
        if first != index:
            raise InvalidFieldError(
                f"finished[{index}].job_id",
                f"job {report.job_id} is reported twice (also at finished[{first}])",
            )


def end_reported(session: Session, worker_name: str, reports: Sequence[EndReport]) -> list[Ended]:
    """Apply the worker's reports in order, as :func:`.pull.finish` applies one."""
    check_reports(reports)
    ended: list[Ended] = []
    for index, report in enumerate(reports):
        try:
            job = finish(
                session,
                report.job_id,
                worker_name,
                report.outcome,
                report.reason,
                exit_code=report.exit_code,
                output=report.output,
            )
        except LateReportError as late:
            ended.append(Ended(report.job_id, late.state, late))
            continue
        except MatchingError as refused:
            raise _naming_report(refused, index, report.job_id) from None
        ended.append(Ended(job.id, job.state))
    return ended


def _naming_report(error: MatchingError, index: int, job_id: int) -> MatchingError:
    """The same refusal, its message saying which report it was about."""
    if isinstance(error, InvalidFieldError):
        return InvalidFieldError(f"finished[{index}].{error.field}", error.message, error.error)
    # The same exception, so that its status and attributes stay; only its words grow.
    error.args = (f"finished[{index}] (job {job_id}): {error}",)
    return error


def pull_up_to(session: Session, worker_name: str, count: int, policy: Policy = "first") -> Batch:
    """Up to ``count`` jobs for the worker, each pulled as :func:`.pull.pull_for` pulls
    one, best first; fewer when it runs out of room or of work. A pull after the first
    that loses a race (409) ends the batch with what it has: its savepoint is rolled
    back, the jobs before it stand. The batch has no reports."""
    if not 1 <= count <= MAX_BATCH:
        raise InvalidFieldError("max", f"must be between 1 and {MAX_BATCH}")
    job, puller = pull_for(session, worker_name, policy)
    batch = Batch([], [], puller)
    while job is not None:
        batch.jobs.append(job)
        if batch.puller.placed_waiting:
            batch.placed.append(job.id)
        if len(batch.jobs) == count:
            break
        savepoint = session.begin_nested()
        try:
            job, puller = pull_for(session, worker_name, policy)
        except ConflictError:
            savepoint.rollback()
            break
        savepoint.commit()
        batch.puller = puller
    return batch


def batch_pull(
    session: Session,
    worker_name: str,
    reports: Sequence[EndReport],
    count: int,
    policy: Policy = "first",
) -> Batch:
    """The worker's reports applied, then up to ``count`` jobs pulled, in the caller's
    transaction."""
    ended = end_reported(session, worker_name, reports)
    batch = pull_up_to(session, worker_name, count, policy)
    batch.ended = ended
    return batch
