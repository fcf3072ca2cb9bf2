"""The scheduler-side allocation path: a waiting job with a jobspec gets vertices on one or
several workers at once (multi-node requests such as ``slot=4/node``, which no single pull
can place), booked in one transaction; and the explanation of a job that cannot be placed.

Workers pass a SQL filter first (active, no cached misfit for the category, free counts
per type covering the per-node needs, an entirely free vertex of each type the request
takes exclusively), in policy order; the allocator then walks
the survivors' trees, loading each node's rows only when it looks inside. When the first
batch of survivors is not enough, the batch grows.

Lock order, as everywhere: the chosen workers (in id order), then the job, then queue
instances and inventory rows. The placement is computed before the locks; booking is
conditional, so a placement that went stale meanwhile fails with a conflict to retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, bindparam, insert, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.db import dialect
from app.db.base import utcnow
from app.db.models import (
    Job,
    JobState,
    Worker,
    WorkerInventory,
    WorkerState,
)
from app.db.tables import ALLOCATIONS, CATEGORIES, JOBS, WORKERS
from app.matching import dispatch, inventory
from app.matching.allocation import Outcome, Policy, allocate, min_nodes, whole_types
from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.misfits import fits
from app.matching.pull_statements import book_first_room

#: Survivors loaded beyond the nodes a job needs at least, in the first batch: the filter
#: below is close to exact, so the first batch nearly always holds the placement.
MARGIN = 4


# Statements of the hot path, built once (building one costs more than running it).
_JOB = select(Job).where(Job.id == bindparam("job_id"))
_JOBSPEC = select(CATEGORIES.c.id, CATEGORIES.c.jobspec).where(
    CATEGORIES.c.id == bindparam("category_id")
)
_LOCK_WORKERS = (
    select(WORKERS.c.id)
    .where(WORKERS.c.id.in_(bindparam("worker_ids", expanding=True)))
    .order_by(WORKERS.c.id)
    .with_for_update()
)
_LOCK_JOB = select(JOBS.c.state).where(JOBS.c.id == bindparam("job_id")).with_for_update()
_ALLOCATE = insert(ALLOCATIONS)
_START = (
    update(JOBS)
    .where(JOBS.c.id == bindparam("job_id"))
    .values(
        state=bindparam("b_state"),
        worker_id=bindparam("b_worker"),
        started_at=bindparam("b_started"),
    )
)


@lru_cache(maxsize=64)
def _survivors(policy: Policy, whole: frozenset[str] = frozenset()) -> Select[*tuple[Any, ...]]:
    """The workers that pass the filter for the category ``:category_id``, in policy order,
    at most ``:limit``, as rows of inventory.node_select (built once per policy and set of
    whole types).

    The filter picks the ids in a subquery of its own, as a query of ids only, and only
    those few rows are joined to their nodes: with the node's rows joined inside the
    filter, PostgreSQL evaluated the whole-vertex conditions for every worker."""
    category_id = bindparam("category_id", type_=Integer)
    order: tuple[ColumnElement[Any], ...]
    if policy == "pack":
        # Most used first: partly used nodes before untouched ones.
        order = (
            (WorkerInventory.untouched == WorkerInventory.vertices).label("k0"),
            WorkerInventory.untouched.label("k1"),
            Worker.rank.label("k2"),
            Worker.id.label("k3"),
        )
    else:
        order = (Worker.rank.label("k0"), Worker.id.label("k1"))
    ids = (
        select(Worker.id.label("id"), *order)
        .join(WorkerInventory, WorkerInventory.worker_id == Worker.id)
        .where(
            Worker.state == WorkerState.ACTIVE,
            fits(category_id, Worker.id, Worker.generation),
            inventory.has_room(category_id, Worker.id),
            *inventory.whole_room(whole),
        )
        .order_by(*order)
        .limit(bindparam("limit"))
        .subquery("survivors")
    )
    return (
        inventory.node_select()
        .join(ids, ids.c.id == Worker.id)
        .order_by(*(ids.c[f"k{i}"] for i in range(len(order))))
    )


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    survivors: int


def find_placement(session: Session, job: Job, policy: Policy) -> Attempt:
    """The allocation the job would get now, over the workers that pass the SQL filter."""
    session.flush()
    connection = session.connection()
    category = connection.execute(_JOBSPEC, {"category_id": job.category_id}).one_or_none()
    if category is None or category.jobspec is None:
        raise InvalidFieldError("jobspec", f"job {job.id} has no shape or jobspec to allocate")
    requests = dispatch.category_requests(category.jobspec)
    nodes = min_nodes(requests)
    survivors = _survivors(policy, whole_types(requests))
    limit = nodes + MARGIN
    while True:
        rows = connection.execute(survivors, {"category_id": category.id, "limit": limit}).all()
        tree = inventory.tree_of(session, rows, batch=nodes)
        outcome = allocate(tree, requests, policy)
        if outcome.placement is not None or len(rows) < limit:
            return Attempt(outcome, len(rows))
        limit *= 4


def schedule_job(session: Session, job_id: int, policy: Policy) -> Job:
    """Allocate a waiting job's vertices on as many workers as it needs and start it; the
    first node is the job's worker (it reports the end). ConflictError when it cannot be
    placed now (GET /v1/jobs/{id}/explain says why)."""
    job = session.execute(_JOB, {"job_id": job_id}).scalar_one_or_none()
    if job is None:
        raise NotFoundError(f"no job with id {job_id}")
    if job.state is not JobState.WAITING:
        raise ConflictError(f"job {job_id} is {job.state.value}, not waiting")
    attempt = find_placement(session, job, policy)
    placement = attempt.outcome.placement
    if placement is None:
        raise ConflictError(f"job {job_id} cannot be placed now; see its explanation")
    # Nodes of a tree built from rows know their worker's id.
    worker_ids = [node.place[0] for node in placement.nodes() if node.place is not None]
    connection = session.connection()
    if dialect.supports_skip_locked(connection):
        # Row locks (PostgreSQL), in the usual order. SQLite serialises writers at BEGIN
        # (IMMEDIATE): nothing changed since the job was read, and there are no row locks.
        connection.execute(_LOCK_WORKERS, {"worker_ids": sorted(set(worker_ids))}).all()
        state = connection.execute(_LOCK_JOB, {"job_id": job_id}).scalar_one()
        if state != JobState.WAITING:
            session.refresh(job)
            raise ConflictError(f"job {job_id} is {job.state.value}, not waiting")
    leader = worker_ids[0]
    queue_instance_id = book_first_room(session, leader, job.slots)
    if queue_instance_id is None:
        name = session.scalar(select(Worker.name).where(Worker.id == leader))
        raise ConflictError(f"worker {name!r} has no free slot for job {job_id}")
    now = utcnow()
    connection.execute(
        _ALLOCATE,
        {
            "job_id": job.id,
            "queue_instance_id": queue_instance_id,
            "slots": job.slots,
            "allocated_at": now,
            "released_at": None,
        },
    )
    inventory.book(session, job, placement)
    connection.execute(
        _START,
        {"job_id": job.id, "b_state": JobState.RUNNING, "b_worker": leader, "b_started": now},
    )
    # The row is written; the object says so without another UPDATE.
    set_committed_value(job, "state", JobState.RUNNING)
    set_committed_value(job, "worker_id", leader)
    set_committed_value(job, "started_at", now)
    return job
