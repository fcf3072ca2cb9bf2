"""Jobs: submission, listing, cancellation, candidates, explanations, dry-run match, and
the running worker's report of the end of its job."""

from __future__ import annotations

import json
from functools import partial
from types import SimpleNamespace

from fastapi import APIRouter, Header, Query, Request, Response, status
from sqlalchemy.orm import Session

from app.api.auth import AdminDep, AnyWorkerDep, Principal, SubmitterDep
from app.api.deps import SessionDep
from app.api.paging import Paging50Dep
from app.api.problems import ProblemError, problem_response
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.schemas.common import MAX_ID, IdPath, Page
from app.api.schemas.jobs import (
    AllocationExplanationOut,
    AllocationOut,
    BulkJobOut,
    BulkJobsIn,
    BulkJobsOut,
    CandidateOut,
    CandidatesOut,
    ExplainSummaryOut,
    ExplanationOut,
    FinishIn,
    JobEventOut,
    JobHistoryOut,
    JobIn,
    JobOut,
    ReturnIn,
    ShortfallOut,
    WorkerExplanationOut,
)
from app.db.models import Job, JobState, Role, WorkerState
from app.matching import (
    candidates,
    history,
    idempotency,
    readiness,
    submission,
    workers,
)
from app.matching.allocation import allocate
from app.matching.allocation import r as r_description
from app.matching.dispatch import pull as dispatch
from app.matching.errors import InvalidFieldError
from app.matching.gridengine import explain as gridengine_explain
from app.matching.late_reports import LateReportError
from app.matching.submission import bulk as bulk_submission

router = APIRouter(prefix="/v1", tags=["jobs"], route_class=RetryingRoute)


def job_out(session: Session, job: Job, *, worker_name: str | None = None) -> JobOut:
    """The job's representation; ``worker_name``, when the caller knows the job's worker,
    saves reading it."""
    if worker_name is None and job.worker_id is not None:
        worker_name = workers.worker_name(session, job.worker_id)
    return job_body(job, worker_name)


def job_body(job: Job | SimpleNamespace, worker_name: str | None) -> JobOut:
    """The representation of a job, an ORM object or a row's columns as attributes (the
    express lane's), whose worker is called ``worker_name``."""
    return JobOut(
        id=job.id,
        state=job.state,
        priority=job.priority,
        slots=job.slots,
        category_id=job.category_id,
        resources=job.resources,
        constraint=job.constraint,
        constraint_syntax=job.constraint_syntax,
        shape=job.shape,
        jobspec=job.jobspec,
        task=job.task,
        command=json.loads(job.command) if job.command is not None else None,
        timeout=job.timeout,
        hard=job.hard,
        soft=job.soft,
        pe=job.pe,
        pe_slots=job.pe_slots,
        queue_list=job.queue_list,
        master_queue_list=job.master_queue_list,
        soft_queue_list=job.soft_queue_list,
        # The express lane's rows may lack it (a pulled job's columns).
        project=getattr(job, "project", None),
        submitter=job.submitter,
        worker=worker_name if job.worker_id is not None else None,
        failure_reason=job.failure_reason,
        attempts=job.attempts,
        exit_code=job.exit_code,
        output=job.output,
        submitted_at=job.submitted_at,
        started_at=job.started_at,
        ended_at=job.ended_at,
        array_id=getattr(job, "array_id", None),
        task_id=getattr(job, "task_id", None),
        task_range=getattr(job, "task_range", None),
    )


def _candidates_out(job_id: int | None, items: list[candidates.Candidate]) -> CandidatesOut:
    return CandidatesOut(
        job=job_id,
        items=[CandidateOut.model_validate(c, from_attributes=True) for c in items],
    )


def visible_job(
    session: Session, job_id: IdPath, principal: Principal, *, lock: bool = False
) -> Job:
    job = submission.get_job(session, job_id, lock=lock)
    if principal.role is Role.SUBMITTER and job.submitter != principal.subject:
        raise ProblemError(403, f"job {job_id} was submitted by someone else")
    return job


@router.post(
    "/jobs",
    status_code=status.HTTP_201_CREATED,
    operation_id="submit_job",
    summary="Submit a job",
    responses={
        201: {
            "description": "The job, waiting (or failed: no worker could ever run it); "
            "`Location` names it",
            "headers": {
                "Location": {"description": "the job's URL", "schema": {"type": "string"}},
                "Idempotent-Replayed": {
                    "description": "`true` when an earlier submission with the same "
                    "Idempotency-Key and body was answered again",
                    "schema": {"type": "string"},
                },
            },
        },
        **errors(401, 403, 503, *BODY_ERRORS),
    },
)
def submit_job(
    body: JobIn,
    session: SessionDep,
    principal: SubmitterDep,
    response: Response,
    idempotency_key: str | None = Header(
        default=None,
        description="Makes a retried submission safe: the same key and body give the same "
        "job (with the header Idempotent-Replayed: true); the same key with another body is "
        "a 422.",
    ),
) -> JobOut:
    """Submit a job in any of the notations (Momotor tags, Flux constraint, shape or
    jobspec, Grid Engine `-l` lists and parallel environment, a debusine task). It waits
    when some registered worker could run it; otherwise it is stored as failed with
    "No suitable worker found" (a Grid Engine job waits instead, as qsub's does)."""

    if body.tasks is not None or body.task_concurrency is not None:
        raise InvalidFieldError(
            "tasks" if body.tasks is not None else "task_concurrency",
            "an array job (qsub -t, -tc) is submitted through POST /v1/jobs/bulk, "
            "which answers every task's job",
        )

    def submit() -> Job:
        return submission.submit_job(session, body.spec(), submitter=principal.subject)

    if idempotency_key is None:
        job = submit()
    else:
        job, replayed = idempotency.submit_once(
            session,
            submitter=principal.subject,
            key=idempotency_key,
            body=body.model_dump(mode="json"),
            submit=submit,
        )
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return job_out(session, job)


@router.post(
    "/jobs/bulk",
    status_code=status.HTTP_201_CREATED,
    operation_id="submit_jobs",
    summary="Submit many jobs, or array jobs",
    responses={
        201: {
            "description": "Every job stored, in body order (an array's tasks in order)",
            "headers": {
                "Idempotent-Replayed": {
                    "description": "`true` when an earlier bulk submission with the same "
                    "Idempotency-Key and body was answered again (its jobs as they are now)",
                    "schema": {"type": "string"},
                },
            },
        },
        **errors(401, 403, 503, *BODY_ERRORS),
    },
)
def submit_jobs(
    body: BulkJobsIn,
    session: SessionDep,
    principal: SubmitterDep,
    request: Request,
    response: Response,
    idempotency_key: str | None = Header(
        default=None,
        description="Makes a retried bulk submission safe: the same key and body give the "
        "same jobs (with the header Idempotent-Replayed: true), stored once; the same key "
        "with another body is a 422. Keys of bulk submissions are apart from those of "
        "POST /v1/jobs.",
    ),
) -> BulkJobsOut:
    """Submit up to `JOBMATCH_MAX_BULK_JOBS` job bodies in one transaction, each as
    `POST /v1/jobs` takes it, with the same outcome as one submission per body in order
    (waiting, or failed with "No suitable worker found"). A body with `tasks` (Grid
    Engine `qsub -t n[-m[:s]]`) is an array job: one job per task id, at most
    `task_concurrency` (`-tc`) of them running at once. One bad body refuses the whole
    request (422 naming it, e.g. `body.jobs.3.resources`) and nothing is stored. The answer
    lists each job's id, state, array and task id only."""
    settings = request.app.state.settings
    if len(body.jobs) > settings.max_bulk_jobs:
        raise InvalidFieldError(
            "jobs",
            f"{len(body.jobs)} job bodies; at most {settings.max_bulk_jobs} "
            "(JOBMATCH_MAX_BULK_JOBS)",
        )

    def submit() -> list[bulk_submission.Submitted]:
        return bulk_submission.submit_jobs(
            session,
            [job.item() for job in body.jobs],
            submitter=principal.subject,
            max_tasks=settings.max_bulk_tasks,
        )

    if idempotency_key is None:
        stored = submit()
    else:
        claim = idempotency.claim_bulk_key(
            session,
            submitter=principal.subject,
            key=idempotency_key,
            body=body.model_dump(mode="json"),
        )
        if claim.replayed is not None:
            response.headers["Idempotent-Replayed"] = "true"
            stored = bulk_submission.submitted(session, claim.replayed)
        else:
            stored = submit()
            idempotency.record_bulk_jobs(session, claim, [job.id for job in stored])
    return BulkJobsOut(
        count=len(stored),
        jobs=[
            BulkJobOut(
                id=job.id,
                state=job.state,
                array_id=job.array_id,
                task_id=job.task_id,
                failure_reason=job.failure_reason,
            )
            for job in stored
        ],
    )


@router.get(
    "/jobs",
    operation_id="list_jobs",
    summary="List jobs",
    responses=errors(401, 403, 422, 503),
)
def list_jobs(
    session: SessionDep,
    principal: SubmitterDep,
    paging: Paging50Dep,
    state: JobState | None = Query(default=None, description="only jobs in this state"),
    category: int | None = Query(default=None, ge=1, le=MAX_ID, description="category id"),
) -> Page[JobOut]:
    """One page of jobs in id order, filtered by state and category; a submitter sees its
    own jobs only (filtered before the page is cut, so every page is full)."""
    jobs = partial(
        submission.list_jobs,
        session,
        state=state,
        category_id=category,
        submitter=principal.subject if principal.role is Role.SUBMITTER else None,
    )
    return paging.listing(jobs, partial(job_out, session))


@router.get(
    "/jobs/{job_id}",
    operation_id="get_job",
    summary="Show a job",
    responses=errors(401, 403, 404, 422, 503),
)
def get_job(job_id: IdPath, session: SessionDep, principal: SubmitterDep) -> JobOut:
    """The job as submitted, its state, its worker while it runs, and how it ended."""
    return job_out(session, visible_job(session, job_id, principal))


@router.post(
    "/jobs/{job_id}/cancel",
    operation_id="cancel_job",
    summary="Cancel a job",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def cancel_job(job_id: IdPath, session: SessionDep, principal: SubmitterDep) -> JobOut:
    """A waiting or running job is cancelled and what it held is freed; 409 for a job that
    already ended."""
    visible_job(session, job_id, principal, lock=True)
    return job_out(session, submission.cancel_job(session, job_id))


@router.get(
    "/jobs/{job_id}/candidates",
    operation_id="list_job_candidates",
    summary="Rank the workers that could run a job",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def job_candidates(job_id: IdPath, session: SessionDep, principal: SubmitterDep) -> CandidatesOut:
    """The workers that could run the waiting job, ranked best first with their strengths.
    For a job that is not waiting, 409 says what it is (running on which worker, finished,
    failed and why)."""
    job = visible_job(session, job_id, principal)
    candidates.require_waiting(session, job)
    return _candidates_out(job.id, candidates.job_candidates(session, job))


@router.get(
    "/jobs/{job_id}/explain",
    operation_id="explain_job",
    summary="Explain why workers can or cannot run a job",
    responses=errors(401, 403, 404, 422, 503),
)
def explain_job(
    job_id: IdPath,
    request: Request,
    session: SessionDep,
    principal: SubmitterDep,
    worker: str | None = Query(default=None, description="one worker; all workers if omitted"),
) -> ExplanationOut:
    """For each worker (or the one named; 404 when there is none of that name): whether
    it fits the job (`eligible`), whether it would take it at its next pull
    (`can_run_now`), and the failing clauses, the first one's code in `reason` (the codes
    of `v_category_fit`, then the dynamic ones). For a waiting job, a summary in the style
    of `condor_q -better-analyze`; for a Grid Engine job the `qstat -j` scheduling info;
    for a waiting job with a shape or jobspec whether it can be placed now."""
    job = visible_job(session, job_id, principal)
    policy = request.app.state.settings.allocation_policy
    lines = gridengine_explain.scheduling_info(session, job)
    verdicts, summary = readiness.explain_workers(session, job, worker, policy, lines)
    allocation = None
    if job.state is JobState.WAITING and (job.shape is not None or job.jobspec is not None):
        attempt = allocate.find_placement(session, job, policy)
        considered = allocate.considered_workers(attempt.tree)
        allocation = AllocationExplanationOut(
            placeable=attempt.outcome.placement is not None,
            candidate_workers=attempt.survivors,
            shortfalls=[
                ShortfallOut(
                    path=s.path,
                    needed=s.needed,
                    found=s.found,
                    places=s.contexts,
                    # A shortfall across nodes (too few of them) lies on no one
                    # worker: it names every worker the attempt considered.
                    workers=sorted(s.workers) or considered,
                )
                for s in attempt.outcome.shortfalls
            ],
            note=None
            if attempt.survivors
            else "no worker passed the filter (fits the category, active, enough free "
            "vertices of each type); the workers' clauses say why",
        )
    return ExplanationOut(
        job=job.id,
        scheduling_info=lines,
        allocation=allocation,
        summary=ExplainSummaryOut(**vars(summary)) if summary is not None else None,
        workers=[WorkerExplanationOut.model_validate(v, from_attributes=True) for v in verdicts],
    )


@router.get(
    "/jobs/{job_id}/history",
    operation_id="get_job_history",
    summary="A job's changes of state",
    responses=errors(401, 403, 404, 422, 503),
)
def job_history(job_id: IdPath, session: SessionDep, principal: SubmitterDep) -> JobHistoryOut:
    """Every change of the job's state: submitted, dispatched (with the attempt), requeued
    after an expired lease, finished, failed, cancelled."""
    job = visible_job(session, job_id, principal)
    return JobHistoryOut(
        job=job.id,
        events=[JobEventOut.model_validate(e) for e in history.events(session, job.id)],
    )


@router.get(
    "/jobs/{job_id}/allocation",
    operation_id="get_job_allocation",
    summary="The vertices a job holds",
    responses=errors(401, 403, 404, 422, 503),
)
def job_allocation(job_id: IdPath, session: SessionDep, principal: SubmitterDep) -> AllocationOut:
    """The concrete vertices the job holds (empty when it holds none)."""
    job = visible_job(session, job_id, principal)
    return AllocationOut(job=job.id, R_lite=r_description.booked_r(session, job.id))


@router.post(
    "/jobs/{job_id}/allocate",
    operation_id="allocate_job",
    summary="Allocate and start a multi-node job",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def allocate_job(job_id: IdPath, request: Request, session: SessionDep, _admin: AdminDep) -> JobOut:
    """Scheduler-side dispatch: allocate a waiting job's vertices on as many workers as it
    needs (multi-node requests), book them and start it on its first node. 409 when it
    cannot be placed now (the explanation says why)."""
    job = allocate.schedule_job(session, job_id, request.app.state.settings.allocation_policy)
    return job_out(session, job)


@router.post(
    "/match",
    tags=["match"],
    operation_id="match_job",
    summary="Dry run: the candidates a job would have",
    responses=errors(401, 403, 503, *BODY_ERRORS),
)
def match(body: JobIn, session: SessionDep, _who: SubmitterDep) -> CandidatesOut:
    """The workers that could run this job now, ranked as `list_job_candidates` ranks
    them, without submitting it: nothing is stored."""
    return _candidates_out(None, candidates.dry_run(session, body.spec()))


#: The problem type of a finish that came after the worker lost the job.
LATE_REPORT_TYPE = "urn:jobmatch:problem:late-report"


@router.post(
    "/jobs/{job_id}/finish",
    response_model=JobOut,
    operation_id="finish_job",
    summary="Report the end of a running job",
    responses=errors(401, 403, 404, 409, 422, 503, *BODY_ERRORS),
)
def finish_job(
    request: Request,
    job_id: IdPath,
    body: FinishIn,
    session: SessionDep,
    principal: AnyWorkerDep,
) -> JobOut | Response:
    """The worker running the job reports its end; what the job held is freed. The same
    report sent again (its reply was lost) is answered 200 again. A report from the worker
    that held the job but lost it (its lease expired) is recorded in the job's history and
    answered 409 saying what happened; it changes nothing else."""
    try:
        return report_finish(session, job_id, principal.subject, body)
    except LateReportError as late:
        # Answered, not raised: the history event must be committed with the response.
        return problem_response(
            request,
            409,
            str(late),
            title="The job was no longer this worker's",
            type=LATE_REPORT_TYPE,
            job=late.job_id,
            lost_at=late.lost_at.isoformat(),
            state=late.state.value,
            worker=late.now_on,
        )


def report_finish(session: Session, job_id: int, worker_name: str, body: FinishIn) -> JobOut:
    """The end of a job as its worker reported it, applied, and the job's answer
    (:class:`LateReportError` from a worker that lost the job). The finish route and the
    express lane (app/api/express.py) both finish through here."""
    job = dispatch.finish(
        session,
        job_id,
        worker_name,
        body.outcome,
        body.reason,
        exit_code=body.exit_code,
        output=body.output,
    )
    # Every job finish() returns ran on the reporting worker: its name needs no read.
    return job_out(session, job, worker_name=worker_name)


@router.post(
    "/jobs/{job_id}/return",
    operation_id="return_job",
    summary="Give a running job back unfinished",
    responses=errors(401, 403, 404, 409, 422, 503, *BODY_ERRORS),
)
def return_job(
    job_id: IdPath,
    session: SessionDep,
    principal: AnyWorkerDep,
    body: ReturnIn | None = None,
) -> JobOut:
    """The worker running the job gives it back unfinished (it is stopping, or it restarted
    and killed what it had left running): the job waits again, in its original place."""
    reason = body.reason if body is not None else None
    return job_out(session, dispatch.return_job(session, job_id, principal.subject, reason))


__all__ = ["JobOut", "WorkerState", "job_out", "router"]
