"""Workers: registration and updates (admin), listing, and the worker's own pull."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from sqlalchemy.orm import Session

from app.api.auth import AdminDep, PrincipalDep, SubmitterDep, WorkerDep
from app.api.deps import SessionDep
from app.api.limits import check_metadata_size
from app.api.longpoll import PullOutcome, pull_or_wait
from app.api.problems import ProblemError
from app.api.retries import RetryingRoute
from app.api.routes.jobs import job_out
from app.api.schemas.common import LimitQuery, NamePath, OffsetQuery, Page, page_of
from app.api.schemas.jobs import JobOut
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
)
from app.db import tokens
from app.db.engine import Database
from app.db.models import Role, Worker
from app.matching import leases, workers
from app.matching.debusine import metadata as debusine_metadata
from app.matching.dispatch import pull as dispatch
from app.matching.locks import worker_by_name
from app.matching.workers import QueueSpec, WorkerSpec

router = APIRouter(prefix="/v1/workers", tags=["workers"], route_class=RetryingRoute)


#: Set on pull and heartbeat responses when the worker should report its dynamic metadata
#: again (never reported, or older than JOBMATCH_METADATA_REFRESH_SECONDS).
REFRESH_HEADER = "Jobmatch-Refresh-Metadata"


def worker_out(session: Session, worker: Worker) -> WorkerOut:
    described = workers.describe_worker(session, worker)
    return WorkerOut(
        properties=described.properties,
        inventory=described.inventory,
        free=described.free,
        name=worker.name,
        rank=worker.rank,
        state=worker.state,
        generation=worker.generation,
        resources=worker.resources,
        queues=[
            QueueInstanceOut(queue=q.queue, slots=q.slots, used_slots=q.used_slots)
            for q in described.queues
        ],
        last_seen=worker.last_seen,
        created_at=worker.created_at,
        updated_at=worker.updated_at,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=RegisteredWorker,
    responses={200: {"model": RegisteredWorker, "description": "An existing worker was updated"}},
)
def register_worker(
    body: WorkerIn, session: SessionDep, _admin: AdminDep, response: Response
) -> RegisteredWorker:
    """Register a worker, or update the worker of that name (200)."""
    spec = WorkerSpec(
        name=body.name,
        resources=body.resources,
        slots=body.slots,
        rank=body.rank,
        state=body.state,
        queues=tuple(QueueSpec(q.name, q.slots) for q in body.queues or ()),
        properties=tuple(body.properties),
        inventory=body.inventory,
    )
    worker, created = workers.upsert_worker(session, spec)
    token = None
    if created:
        _row, token = tokens.issue_token(session, role=Role.WORKER, subject=worker.name)
    else:
        response.status_code = status.HTTP_200_OK
    session.refresh(worker)
    return RegisteredWorker(token=token, **worker_out(session, worker).model_dump())


@router.get("", response_model=Page[WorkerOut])
def list_workers(
    session: SessionDep, _who: SubmitterDep, limit: LimitQuery = 50, offset: OffsetQuery = 0
) -> Page[WorkerOut]:
    rows = workers.list_workers(session, limit=limit + 1, offset=offset)
    return page_of([worker_out(session, w) for w in rows], limit, offset)


@router.get("/{name}", response_model=WorkerOut)
def get_worker(name: NamePath, session: SessionDep, _who: SubmitterDep) -> WorkerOut:
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


#: The longest a pull may wait for work; a client's read timeout must be longer.
MAX_WAIT_SECONDS = 60.0
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


@router.post(
    "/{name}/pull",
    response_model=JobOut,
    responses={
        200: {"headers": _REFRESH_DOC},
        204: {"description": "No job for this worker now", "headers": _REFRESH_DOC},
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
    metadata first."""
    settings = request.app.state.settings
    database: Database = request.app.state.database

    def pull_once() -> PullOutcome[JobOut]:
        """One attempt, one transaction (in the thread pool; nothing is held between
        attempts)."""
        with database.transaction() as session:
            job, puller = dispatch.pull_for(session, name, settings.allocation_policy)
            body = job_out(session, job, worker_name=name) if job is not None else None
        return PullOutcome(
            job=body,
            category_id=job.category_id if job is not None else None,
            refresh=debusine_metadata.report_due(
                puller.metadata_reported_at, settings.metadata_refresh_seconds
            ),
            worker_id=puller.id,
            could_take_work=puller.active and puller.max_free > 0,
        )

    outcome = await pull_or_wait(request.app.state.longpoll.hub, pull_once, wait)
    if outcome.job is None:
        empty = Response(status_code=status.HTTP_204_NO_CONTENT)
        if outcome.refresh:
            empty.headers[REFRESH_HEADER] = "true"
        return empty
    if outcome.refresh:
        response.headers[REFRESH_HEADER] = "true"
    return outcome.job


@router.post("/{name}/heartbeat", response_model=HeartbeatOut)
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


@router.get("/{name}/metadata", response_model=MetadataOut)
def get_metadata(
    name: NamePath, request: Request, session: SessionDep, principal: PrincipalDep
) -> MetadataOut:
    """The worker's static, dynamic and effective metadata (admins, submitters and the
    worker itself)."""
    if principal.role is Role.WORKER and principal.subject != name:
        raise ProblemError(403, f"this token belongs to worker {principal.subject!r}, not {name!r}")
    return _metadata_out(request, session, worker_by_name(session, name))


@router.put("/{name}/metadata", response_model=MetadataOut)
def set_static_metadata(
    name: NamePath, body: StaticMetadataIn, request: Request, session: SessionDep, _admin: AdminDep
) -> MetadataOut:
    """The administrator replaces the worker's static metadata; it overrides what the
    worker reports, and its `tasks_allowlist`/`tasks_denylist` decide which tasks it runs."""
    check_metadata_size(body.metadata, request.app.state.settings)
    worker = debusine_metadata.set_static_metadata(session, name, body.metadata)
    return _metadata_out(request, session, worker)


@router.post("/{name}/metadata", response_model=MetadataOut)
def report_dynamic_metadata(
    name: NamePath, body: DynamicMetadataIn, request: Request, session: SessionDep, _w: WorkerDep
) -> MetadataOut:
    """The worker reports its dynamic metadata (with its own token); it replaces the
    previous report, and the server stamps the time."""
    check_metadata_size(body.metadata, request.app.state.settings)
    worker = debusine_metadata.report_dynamic_metadata(session, name, body.metadata)
    return _metadata_out(request, session, worker)
