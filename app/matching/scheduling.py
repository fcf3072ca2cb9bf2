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

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import (
    Allocation,
    Category,
    Job,
    JobState,
    Worker,
    WorkerInventory,
    WorkerState,
)
from app.matching import dispatch, inventory
from app.matching.allocation import Outcome, Policy, allocate, min_nodes, whole_types
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.misfits import fits

#: Survivors loaded beyond the nodes a job needs at least, in the first batch: the filter
#: below is close to exact, so the first batch nearly always holds the placement.
MARGIN = 4


def _survivors(
    category_id: int, policy: Policy, limit: int, whole: frozenset[str] = frozenset()
) -> Select[int]:
    query: Select[int] = (
        select(Worker.id.label("id"))
        .join(WorkerInventory, WorkerInventory.worker_id == Worker.id)
        .where(
            Worker.state == WorkerState.ACTIVE,
            fits(category_id, Worker.id, Worker.generation),
            inventory.has_room(category_id, Worker.id),
            *inventory.whole_room(whole),
        )
    )
    if policy == "pack":
        # Most used first: partly used nodes before untouched ones.
        query = query.order_by(
            (WorkerInventory.untouched == WorkerInventory.vertices),
            WorkerInventory.untouched,
            Worker.rank,
            Worker.id,
        )
    else:
        query = query.order_by(Worker.rank, Worker.id)
    return query.limit(limit)


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    survivors: int


def find_placement(session: Session, job: Job, policy: Policy) -> Attempt:
    """The allocation the job would get now, over the workers that pass the SQL filter."""
    category = session.get(Category, job.category_id)
    if category is None or category.jobspec is None:
        raise InvalidFieldError("jobspec", f"job {job.id} has no shape or jobspec to allocate")
    requests = dispatch.category_requests(category.jobspec)
    nodes = min_nodes(requests)
    whole = whole_types(requests)
    limit = nodes + MARGIN
    while True:
        ids = list(session.scalars(_survivors(category.id, policy, limit, whole)))
        tree = inventory.worker_tree(session, ids, batch=nodes)
        outcome = allocate(tree, requests, policy)
        if outcome.placement is not None or len(ids) < limit:
            return Attempt(outcome, len(ids))
        limit *= 4


def schedule_job(session: Session, job_id: int, policy: Policy) -> Job:
    """Allocate a waiting job's vertices on as many workers as it needs and start it; the
    first node is the job's worker (it reports the end). ConflictError when it cannot be
    placed now (GET /v1/jobs/{id}/explain says why)."""
    job = session.get(Job, job_id)
    if job is None:
        from app.matching.errors import NotFoundError

        raise NotFoundError(f"no job with id {job_id}")
    if job.state is not JobState.WAITING:
        raise ConflictError(f"job {job_id} is {job.state.value}, not waiting")
    attempt = find_placement(session, job, policy)
    placement = attempt.outcome.placement
    if placement is None:
        raise ConflictError(f"job {job_id} cannot be placed now; see its explanation")
    nodes = placement.nodes()
    names = [node.worker for node in nodes]
    workers = session.scalars(
        select(Worker).where(Worker.name.in_(names)).order_by(Worker.id).with_for_update()
    ).all()
    by_name = {w.name: w for w in workers}
    job = session.get(Job, job_id, with_for_update=True, populate_existing=True)
    assert job is not None
    if job.state is not JobState.WAITING:
        raise ConflictError(f"job {job_id} is {job.state.value}, not waiting")
    leader = by_name[str(names[0])]
    slots = dispatch.free_slots(session, leader.id)
    queue_instance_id = dispatch._book(session, job, slots)
    if queue_instance_id is None:
        raise ConflictError(f"worker {leader.name!r} has no free slot for job {job_id}")
    session.add(Allocation(job_id=job.id, queue_instance_id=queue_instance_id, slots=job.slots))
    inventory.book(session, job, placement)
    job.state = JobState.RUNNING
    job.worker_id = leader.id
    job.started_at = utcnow()
    session.flush()
    return job
