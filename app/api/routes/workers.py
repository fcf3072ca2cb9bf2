"""Workers: registration and updates (admin), listing, and the worker's own pull."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Query, Request, Response, status
from sqlalchemy.orm import Session

from app.api.auth import AdminDep, PrincipalDep, SubmitterDep, WorkerDep
from app.api.deps import SessionDep
from app.api.limits import check_metadata_size
from app.api.longpoll import MAX_WAIT_SECONDS, PullOutcome, client_gone, pull_or_wait
from app.api.paging import Paging50Dep
from app.api.problems import ProblemError
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.routes.jobs import job_out
from app.api.schemas.common import NamePath, Page
from app.api.schemas.gridengine import LoadValuesIn, ValuesOut
from app.api.schemas.jobs import EndedOut, JobOut, PullBatchIn, PullBatchOut
from app.api.schemas.workers import (
    DynamicMetadataIn,
    HeartbeatOut,
    MetadataOut,
    NamespaceOut,
    QueueInstanceOut,
    RegisteredWorker,
    StaticMetadataIn,
    WorkerIn,
    WorkerOut,
    WorkerPatch,
)
from app.db import tokens
from app.db.engine import Database
from app.db.models import Role, Worker, WorkerState
from app.matching import leases, worker_lifecycle, workers
from app.matching.debusine import metadata as debusine_metadata
from app.matching.dispatch import batch
from app.matching.dispatch import pull as dispatch
from app.matching.dispatch.puller import Puller
from app.matching.gridengine import admin as gridengine_admin
from app.matching.gridengine.values import REPORT, resolve_target
from app.matching.locks import worker_by_name
from app.matching.wakeups import WaitingFull
from app.matching.workers import WorkerSpec
from app.metrics import LONGPOLL_SUPERSEDED, REFUSED_OVERLOADED
from app.settings import Settings
from app.wire.queues import QueueSpec

router = APIRouter(prefix="/v1/workers", tags=["workers"], route_class=RetryingRoute)


#: Set on pull and heartbeat responses when the worker should report its dynamic metadata
#: again (never reported, or older than JOBMATCH_METADATA_REFRESH_SECONDS).
REFRESH_HEADER = "Jobmatch-Refresh-Metadata"
#: Set on a pull's answer when the job is one the scheduler placed on this worker (POST
#: /v1/schedule or /v1/jobs/{id}/allocate) rather than one the pull chose: the body is
#: the same job body, already counted as a dispatch (issue 22).
PLACED_HEADER = "Jobmatch-Placed"
#: Set on a waiting pull's 204 when a newer pull of the same worker took its place: the
#: worker held more waiting pulls than it has free slots (app/matching/wakeups.py).
SUPERSEDED_HEADER = "Jobmatch-Superseded"


def worker_out(session: Session, worker: Worker) -> WorkerOut:
    described = workers.describe_worker(session, worker)
    return WorkerOut(
        properties=described.properties,
        inventory=described.inventory,
        free=described.free,
        name=worker.name,
        rank=worker.rank,
        state=worker.state,
        state_reason=worker.state_reason,
        state_set_by=worker.state_set_by,
        state_changed_at=worker.state_changed_at,
        generation=worker.generation,
        resources=worker.resources,
        queues=[QueueInstanceOut.model_validate(q, from_attributes=True) for q in described.queues],
        last_seen=worker.last_seen,
        created_at=worker.created_at,
        updated_at=worker.updated_at,
    )


def worker_spec(body: WorkerIn) -> WorkerSpec:
    """The registration a body states, as the services take it."""
    return WorkerSpec(
        name=body.name,
        resources=body.resources,
        slots=body.slots,
        rank=body.rank,
        state=body.state,
        queues=tuple(QueueSpec(q.name, q.slots) for q in body.queues or ()),
        properties=tuple(body.properties),
        inventory=body.inventory,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    operation_id="register_worker",
    summary="Register a worker, or with replace=true replace the one of that name",
    responses={
        200: {
            "model": RegisteredWorker,
            "description": "An existing worker was replaced whole by this registration "
            "(replace=true); `token_kept` says whether its token still works",
        },
        201: {"description": "A new worker was registered; the answer holds its token"},
        **errors(401, 403, 409, 503, *BODY_ERRORS),
    },
)
def register_worker(
    body: WorkerIn,
    session: SessionDep,
    admin: AdminDep,
    response: Response,
    replace: bool = Query(
        default=False,
        description="replace the whole worker of that name if it exists (without it, an "
        "existing name is refused with 409)",
    ),
) -> RegisteredWorker:
    """Register a worker (201, with its token). A name that exists is refused with 409
    naming the worker, unless `replace=true` asks to replace the whole worker of that name
    (200): every field left out takes its default again (no resources, one slot, no rank,
    no properties, no inventory, state `active`). A replaced worker keeps its token when it
    has one that works (`token: null`, `token_kept: true`); one whose tokens were all
    revoked or expired gets a new one in `token`. So an answer always holds a token that
    works or says that the old one still does. To change some fields only, such as draining
    a worker, use `PATCH /v1/workers/{name}`. 409 also when another worker holds the
    rank."""
    spec = worker_spec(body)
    worker, created = worker_lifecycle.register_worker(
        session, spec, by=admin.subject, replace=replace
    )
    token = None
    kept = not created and tokens.has_usable_token(session, role=Role.WORKER, subject=worker.name)
    if not kept:
        _row, token = tokens.issue_token(session, role=Role.WORKER, subject=worker.name)
    if not created:
        response.status_code = status.HTTP_200_OK
    session.refresh(worker)
    return RegisteredWorker(
        token=token, token_kept=kept, **worker_out(session, worker).model_dump()
    )


T = TypeVar("T")
#: What a pull's answer holds: one job's body, or a batch's.
Body = TypeVar("Body")


def patch_changes(body: WorkerPatch) -> worker_lifecycle.WorkerChanges:
    """The fields the patch gives; the others UNSET (left as they are)."""
    given = body.model_fields_set
    unset = worker_lifecycle.UNSET

    def pick(name: str, value: T) -> T | worker_lifecycle.Unset:
        return value if name in given else unset

    return worker_lifecycle.WorkerChanges(
        state=pick("state", body.state or WorkerState.ACTIVE),
        reason=pick("reason", body.reason),
        resources=pick("resources", body.resources or ""),
        slots=pick("slots", body.slots or 0),
        rank=pick("rank", body.rank),
        queues=pick("queues", tuple(QueueSpec(q.name, q.slots) for q in body.queues or ())),
        properties=pick("properties", tuple(body.properties or ())),
        inventory=pick("inventory", body.inventory),
    )


@router.patch(
    "/{name}",
    operation_id="update_worker",
    summary="Change some of a worker's fields (drain, disable, resume, resize)",
    responses=errors(401, 403, 404, 409, 503, *BODY_ERRORS),
)
def update_worker(
    name: NamePath, body: WorkerPatch, session: SessionDep, admin: AdminDep
) -> WorkerOut:
    """Change only the fields given (JSON merge patch, RFC 7396); the others keep their
    values. `{"state": "draining", "reason": "..."}` drains the worker: it finishes what it
    runs and gets nothing new; `disabled` also stops it from counting as able to run
    anything; `active` resumes it. A change that can alter what the worker fits (resources,
    slots, queues, rank, properties, inventory) bumps its generation. 409 when the rank
    belongs to another worker; 422 for an invalid value (a notation, a queue still in use,
    a shrink below the slots in use), and nothing is changed."""
    changes = patch_changes(body)
    worker = worker_lifecycle.update_worker(session, name, changes, by=admin.subject)
    session.refresh(worker)
    return worker_out(session, worker)


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    operation_id="delete_worker",
    summary="Remove a worker (and, with requeue=true, return its jobs to the queue)",
    responses=errors(401, 403, 404, 409, 422, 503),
)
def delete_worker(
    name: NamePath,
    session: SessionDep,
    admin: AdminDep,
    requeue: bool = Query(
        default=False,
        description="return the jobs the worker runs to the queue (recorded in their "
        "history) instead of refusing",
    ),
) -> Response:
    """Remove the worker, its queue instances and its tokens. Finished jobs keep their
    history. A worker that runs jobs is refused with 409 unless `requeue=true`."""
    worker_lifecycle.delete_worker(session, name, requeue=requeue, by=admin.subject)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "",
    operation_id="list_workers",
    summary="List workers",
    responses=errors(401, 403, 422, 503),
)
def list_workers(session: SessionDep, _who: SubmitterDep, paging: Paging50Dep) -> Page[WorkerOut]:
    """Every registered worker with its state, slots and free inventory, by name."""
    return paging.listing(partial(workers.list_workers, session), partial(worker_out, session))


@router.get(
    "/{name}",
    operation_id="get_worker",
    summary="Show a worker",
    responses=errors(401, 403, 404, 422, 503),
)
def get_worker(name: NamePath, session: SessionDep, _who: SubmitterDep) -> WorkerOut:
    """The worker's resources, properties, queue instances with their used slots, and
    the free units of its inventory."""
    return worker_out(session, worker_by_name(session, name))


def _refresh_due(request: Request, worker: Worker) -> bool:
    max_age: float = request.app.state.settings.metadata_refresh_seconds
    return debusine_metadata.refresh_due(worker, max_age)


_REFRESH_DOC = {
    REFRESH_HEADER: {
        "description": "`true` when the worker should report its dynamic metadata again",
        "schema": {"type": "string"},
    }
}
_SUPERSEDED_DOC = {
    SUPERSEDED_HEADER: {
        "description": "`true` when a newer pull of this worker took this waiting pull's "
        "place (a worker holds at most one waiting pull per free slot)",
        "schema": {"type": "string"},
    }
}
_PLACED_DOC = {
    PLACED_HEADER: {
        "description": "`true` when the scheduler placed this job on the worker",
        "schema": {"type": "string"},
    }
}


def pull_once(database: Database, settings: Settings, name: str) -> PullOutcome[JobOut]:
    """One attempt of the worker's pull in a transaction of its own (run in the thread
    pool; nothing is held between attempts): the job it started, rendered before the
    commit, and what the answer's headers and a long poll need to know. The pull route
    and the express lane (app/api/express.py) both pull through here."""
    with database.transaction() as session:
        job, puller = dispatch.pull_for(session, name, settings.allocation_policy)
        body = job_out(session, job, worker_name=name) if job is not None else None
    return pull_outcome(body, job.category_id if job is not None else None, puller, settings)


def pull_outcome(
    body: Body | None, category_id: int | None, puller: Puller, settings: Settings
) -> PullOutcome[Body]:
    """What a pull found, with what its answer's headers and a long poll need to know
    of the worker as the pull read it."""
    return PullOutcome(
        job=body,
        category_id=category_id,
        refresh=debusine_metadata.report_due(
            puller.metadata_reported_at, settings.metadata_refresh_seconds
        ),
        worker_id=puller.id,
        could_take_work=puller.active and puller.max_free > 0,
        free_slots=max(1, puller.max_free),
        placed=body is not None and puller.placed_waiting,
        refresh_due_in=debusine_metadata.seconds_until_report_due(
            puller.metadata_reported_at, settings.metadata_refresh_seconds
        ),
    )


WaitQuery = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_SECONDS,
        allow_inf_nan=False,
        description="Seconds to wait for a job when none is waiting now (long poll); "
        "0 answers at once",
    ),
]


async def _pull_or_wait(
    request: Request, attempt: Callable[[], PullOutcome[Body]], wait: float, name: str
) -> PullOutcome[Body]:
    """:func:`pull_or_wait` on the app's hub; 503 with Retry-After when the process
    holds as many waiting pulls as it may and none of this worker's."""
    hub = request.app.state.longpoll.hub
    try:
        return await pull_or_wait(hub, attempt, wait, partial(client_gone, request), name)
    except WaitingFull as full:
        REFUSED_OVERLOADED.labels("waiting_pulls").inc()
        raise ProblemError(503, str(full), headers={"Retry-After": "5"}) from None


def _mark_superseded(response: Response, outcome: PullOutcome[Any]) -> None:
    """A superseded pull says so, and its connection is closed: a client that lost track
    of its pulls would otherwise keep every one of them open, idle, against the
    connection budget."""
    if outcome.superseded:
        LONGPOLL_SUPERSEDED.inc()
        response.headers[SUPERSEDED_HEADER] = "true"
        response.headers["Connection"] = "close"


@router.post(
    "/{name}/pull",
    response_model=JobOut,
    operation_id="pull_job",
    summary="Pull the best job this worker can run",
    responses={
        200: {
            "description": "The job, now running on this worker",
            "headers": {**_REFRESH_DOC, **_PLACED_DOC},
        },
        204: {
            "description": "No job for this worker now",
            "headers": {**_REFRESH_DOC, **_SUPERSEDED_DOC},
        },
        **errors(401, 403, 404, 409, 422, 503),
    },
)
async def pull(
    name: NamePath,
    request: Request,
    _worker: WorkerDep,
    response: Response,
    wait: WaitQuery = 0.0,
) -> JobOut | Response:
    """The worker asks for work: the best waiting job it can run, its slots (and, for a
    jobspec job on a worker with an inventory, its vertices) booked. With ``wait`` the
    request waits up to that many seconds for a job it could run (a submission, a finish
    that frees its room, a change of the worker, a placement on it wake it) before it
    answers 204. The ``Jobmatch-Refresh-Metadata: true`` header asks it to report its
    metadata first; ``Jobmatch-Placed: true`` marks a job the scheduler placed on it. 409
    when what it would book was taken by a concurrent pull; pulling again is safe.

    A worker holds at most one waiting pull per free slot (at least one): a newer one
    supersedes the oldest, which answers 204 with ``Jobmatch-Superseded: true`` at once,
    and closes its connection.
    503 with Retry-After when the server process holds as many waiting pulls as it may
    (JOBMATCH_MAX_WAITING_PULLS) and none of this worker's."""
    attempt = partial(pull_once, request.app.state.database, request.app.state.settings, name)
    outcome = await _pull_or_wait(request, attempt, wait, name)
    if outcome.job is None:
        empty = Response(status_code=status.HTTP_204_NO_CONTENT)
        if outcome.refresh:
            empty.headers[REFRESH_HEADER] = "true"
        _mark_superseded(empty, outcome)
        return empty
    if outcome.refresh:
        response.headers[REFRESH_HEADER] = "true"
    if outcome.placed:
        response.headers[PLACED_HEADER] = "true"
    return outcome.job


def batch_once(
    database: Database,
    settings: Settings,
    name: str,
    reports: Sequence[batch.EndReport],
    count: int,
) -> tuple[PullOutcome[list[JobOut]], list[EndedOut], list[int]]:
    """One attempt of a batch pull in a transaction of its own (run in the thread pool):
    the carried reports applied, then up to ``count`` jobs started, their answers
    rendered before the commit."""
    with database.transaction() as session:
        done = batch.batch_pull(session, name, reports, count, settings.allocation_policy)
        bodies = [job_out(session, job, worker_name=name) for job in done.jobs]
    last_category = done.jobs[-1].category_id if done.jobs else None
    outcome = pull_outcome(bodies or None, last_category, done.puller, settings)
    return outcome, [ended_out(ended) for ended in done.ended], done.placed


def ended_out(ended: batch.Ended) -> EndedOut:
    late = ended.late
    return EndedOut(
        job_id=ended.job_id,
        state=ended.state,
        late=late is not None,
        detail=str(late) if late is not None else None,
        now_on=late.now_on if late is not None else None,
    )


@router.post(
    "/{name}/pull-batch",
    operation_id="pull_batch",
    summary="Report ended jobs and pull up to N jobs, in one request",
    responses={
        200: {
            "description": "The reports' results and the jobs now running on this worker "
            "(none when there is nothing for it)",
            "headers": {**_REFRESH_DOC, **_SUPERSEDED_DOC},
        },
        **errors(401, 403, 404, 409, 503, *BODY_ERRORS),
    },
)
async def pull_batch(
    name: NamePath,
    request: Request,
    _worker: WorkerDep,
    response: Response,
    body: PullBatchIn | None = None,
    wait: WaitQuery = 0.0,
    max_jobs: int = Query(
        default=1,
        alias="max",
        ge=1,
        le=batch.MAX_BATCH,
        description="the most jobs to start (a worker with N free slots asks for N)",
    ),
) -> PullBatchOut:
    """The worker reports the jobs it ended (each as `POST /v1/jobs/{job_id}/finish`
    would: a resend is answered as the first) and pulls up to `max` jobs, each as
    `POST /v1/workers/{name}/pull` would, in one transaction. A report from a worker that
    lost the job is recorded and answered with `late: true`; the pull goes on. Any other
    report the finish would refuse refuses the whole request (nothing is stored), naming
    the report (`finished[i]`). With `wait`, a batch that started no job waits as a long
    poll does (its reports are applied first), then pulls again."""
    database, settings = request.app.state.database, request.app.state.settings
    reports = [
        batch.EndReport(r.job_id, r.outcome, r.reason, r.exit_code, r.output)
        for r in (body.finished if body is not None else ())
    ]
    attempt = partial(batch_once, database, settings, name)
    outcome, ended, placed = await anyio.to_thread.run_sync(attempt, reports, max_jobs)
    if outcome.job is None and wait > 0:
        # The reports are applied; the wait pulls only.
        placed = []

        def pull_only() -> PullOutcome[list[JobOut]]:
            waited, _ended, placed_now = attempt((), max_jobs)
            placed[:] = placed_now
            return waited

        outcome = await _pull_or_wait(request, pull_only, wait, name)
        _mark_superseded(response, outcome)
    if outcome.refresh:
        response.headers[REFRESH_HEADER] = "true"
    return PullBatchOut(finished=ended, jobs=outcome.job or [], placed=placed)


@router.post(
    "/{name}/heartbeat",
    operation_id="send_heartbeat",
    summary="Tell the server this worker is alive",
    responses=errors(401, 403, 404, 422, 503),
)
def heartbeat(
    name: NamePath, request: Request, session: SessionDep, _worker: WorkerDep
) -> HeartbeatOut:
    """The worker is alive (while it runs a job, for instance): its lease on its running
    jobs is renewed, and the answer says whether it should report its metadata again."""
    worker = leases.heartbeat(session, name)
    return HeartbeatOut(
        worker=name, last_seen=worker.last_seen, refresh_metadata=_refresh_due(request, worker)
    )


def _metadata_out(request: Request, session: Session, worker: Worker) -> MetadataOut:
    view = debusine_metadata.read_metadata(session, worker)
    return MetadataOut(
        worker=worker.name,
        generation=worker.generation,
        static=view.static,
        dynamic=view.dynamic,
        effective=view.effective,
        namespaces={
            name: NamespaceOut(version=version, reported_at=view.namespaces_reported_at[name])
            for name, version in sorted(view.versions.items())
        },
        reported_at=view.reported_at,
        refresh_metadata=_refresh_due(request, worker),
    )


@router.get(
    "/{name}/metadata",
    operation_id="get_worker_metadata",
    summary="Show a worker's metadata",
    responses=errors(401, 403, 404, 422, 503),
)
def get_metadata(
    name: NamePath, request: Request, session: SessionDep, principal: PrincipalDep
) -> MetadataOut:
    """The worker's static, dynamic and effective metadata (admins, submitters and the
    worker itself)."""
    if principal.role is Role.WORKER and principal.subject != name:
        raise ProblemError(403, f"this token belongs to worker {principal.subject!r}, not {name!r}")
    return _metadata_out(request, session, worker_by_name(session, name))


@router.put(
    "/{name}/metadata",
    operation_id="set_static_metadata",
    summary="Replace a worker's static metadata",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def set_static_metadata(
    name: NamePath, body: StaticMetadataIn, request: Request, session: SessionDep, _admin: AdminDep
) -> MetadataOut:
    """The administrator replaces the worker's static metadata; it overrides what the
    worker reports, and its `tasks_allowlist`/`tasks_denylist` decide which tasks it runs."""
    check_metadata_size(body.metadata, request.app.state.settings)
    worker = debusine_metadata.set_static_metadata(session, name, body.metadata)
    return _metadata_out(request, session, worker)


@router.post(
    "/{name}/metadata",
    operation_id="report_dynamic_metadata",
    summary="Report this worker's dynamic metadata",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def report_dynamic_metadata(
    name: NamePath, body: DynamicMetadataIn, request: Request, session: SessionDep, _w: WorkerDep
) -> MetadataOut:
    """The worker reports its dynamic metadata (with its own token); it replaces the
    previous report, and the server stamps the time."""
    check_metadata_size(body.metadata, request.app.state.settings)
    worker = debusine_metadata.report_dynamic_metadata(session, name, body.metadata)
    return _metadata_out(request, session, worker)


@router.put(
    "/{name}/load",
    operation_id="report_worker_load",
    summary="Report this worker's load values",
    responses=errors(401, 403, 404, 503, *BODY_ERRORS),
)
def report_load(
    name: NamePath, body: LoadValuesIn, session: SessionDep, _w: WorkerDep
) -> ValuesOut:
    """The worker reports its host's load values (Grid Engine's execd reports: arch,
    num_proc, load_avg, np_load_avg, mem_free, ...) with its own token; they replace its
    previous report only. What an administrator set (complex values, load values of
    ``PUT /v1/values/hosts/{host}``) stays, and an administrator's load value of an
    attribute is the one matching sees (`reported_load_values` of the host's values).
    A report is a word from the worker, as a heartbeat is (an unknown worker is active
    again)."""
    target = resolve_target(session, "host", name, None)
    leases.heartbeat(session, name)
    changed = gridengine_admin.set_values(
        session, target, "load_values", body.load_values, source=REPORT
    )
    return ValuesOut(static_changed=changed)
