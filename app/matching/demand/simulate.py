"""New workers of a template, registered for real in a savepoint that is rolled back, and
what the real services say they would do: whether the misfit cache lets one run a
category (a submission's rule), whether a pull by one would start a category's first job
(``would_start``, the pull's own steps), and for a job on several nodes how many new
workers an allocation now needs (``placement_now``). Nothing of it is stored."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import InventoryCount, Job, JobState, QueueInstance
from app.matching.allocation import allocate
from app.matching.allocation.allocator import Policy
from app.matching.demand.answers import pull_would_start
from app.matching.demand.need import job_slots, node_needs, vertex_name
from app.matching.demand.sandbox import rolled_back
from app.matching.demand.templates import Template, register_simulated
from app.matching.demand.waiting import WaitingCategory
from app.matching.dispatch.plain_starts import starts_now
from app.matching.errors import ConflictError

#: The dimension of a job's slots in a packing (vertices are named by their type).
SLOTS = "slots"


@dataclass(frozen=True)
class Runs:
    """A template's new workers against one category: a new worker can start its jobs;
    ``size`` is what one job books on one of them; for a job on several nodes,
    ``allocated[k]`` is how many new workers started its first k + 1 jobs (empty for a
    job on one node), and ``extrapolate`` whether jobs beyond those may be counted at the
    rate of the last (the simulation ran out of jobs to try, not of workers)."""

    category_id: int
    size: dict[str, int]
    allocated: tuple[int, ...]
    extrapolate: bool


@dataclass(frozen=True)
class Simulated:
    """A template's simulation: what one new worker of it has (slots in all, and the
    vertex totals of its inventory) and the categories it can start."""

    template: Template
    capacity: dict[str, int]
    runs: dict[int, Runs]


def _capacity(session: Session, worker_id: int) -> tuple[dict[str, int], bool]:
    """What a new worker has, as a packing counts it: its slots over its queue instances
    and its inventory's totals; and whether it has an inventory."""
    slots = sum(
        session.scalars(select(QueueInstance.slots).where(QueueInstance.worker_id == worker_id))
    )
    capacity = {SLOTS: int(slots)}
    inventory = session.execute(
        select(InventoryCount.type, InventoryCount.unit, InventoryCount.total).where(
            InventoryCount.worker_id == worker_id
        )
    ).all()
    for type_, unit, total in inventory:
        capacity[vertex_name(type_, unit)] = int(total)
    return capacity, bool(inventory)


#: Jobs of a category on several nodes that are allocated for real in the simulation;
#: the workers of any more are extrapolated from the last of them.
SIMULATED_ALLOCATIONS = 32


def _allocations(
    session: Session, template: Template, category_id: int, nodes: int, policy: Policy
) -> tuple[int, ...]:
    """How many new workers of the template (one is registered already) it takes to
    start the first 1, 2, ... waiting jobs of a category on several nodes, by allocating
    them for real (``schedule_job``, the decision of ``POST /v1/jobs/{id}/allocate``) and
    adding a worker whenever the next one does not fit (at most ``nodes`` per job); up to
    :data:`SIMULATED_ALLOCATIONS` jobs and the template's ``max_count``. Empty when not
    even the first starts."""
    job_ids = session.scalars(
        select(Job.id)
        .where(Job.category_id == category_id, Job.state == JobState.WAITING)
        .order_by(Job.id)
        .limit(SIMULATED_ALLOCATIONS)
    ).all()
    most = template.max_count
    needed: list[int] = []
    registered = 1
    with rolled_back(session):
        for job_id in job_ids:
            while not _allocated(session, job_id, policy):
                if most is not None and registered >= most:
                    return tuple(needed)
                if registered - (needed[-1] if needed else 0) >= nodes:
                    # A job on ``nodes`` nodes that as many fresh workers cannot hold,
                    # more will not either.
                    return tuple(needed)
                registered += 1
                register_simulated(session, template, registered)
            needed.append(registered)
    return tuple(needed)


def _more_than_simulated(needed: tuple[int, ...]) -> bool:
    """Whether the simulation stopped for want of jobs to try rather than of room: then
    the jobs beyond it may be extrapolated."""
    return len(needed) == SIMULATED_ALLOCATIONS


def _allocated(session: Session, job_id: int, policy: Policy) -> bool:
    """Allocate the job now in a savepoint kept on success (the caller rolls back)."""
    savepoint = session.begin_nested()
    try:
        allocate.schedule_job(session, job_id, policy)
    except ConflictError:
        savepoint.rollback()
        return False
    savepoint.commit()
    return True


def simulate(
    session: Session, template: Template, targets: list[WaitingCategory], policy: Policy
) -> Simulated:
    """Register one new worker of the template in a savepoint and ask, per category of
    ``targets``, whether it would start the first waiting job (a rehearsed pull's own
    steps), or how many new workers an allocation of it needs; roll it all back."""
    runs: dict[int, Runs] = {}
    with rolled_back(session):
        worker = register_simulated(session, template, 1)
        name, worker_id = worker.name, worker.id
        capacity, has_inventory = _capacity(session, worker_id)
        # The plain kind of job on the plain kind of worker is decided in one statement
        # (app/matching/dispatch/plain_starts.py); the others are rehearsed.
        starts = starts_now(
            session, [wc.first_job for wc in targets if wc.nodes <= 1], worker_id=worker_id
        )
        if template.max_count is not None and template.max_count < 1:
            targets = []
        for wc in targets:
            category = wc.category
            size = {SLOTS: job_slots(category)}
            if has_inventory:
                size.update(_per_node(session, category.id))
            if wc.nodes > 1:
                needed = _allocations(session, template, category.id, wc.nodes, policy)
                if needed:
                    runs[category.id] = Runs(
                        category.id, size, needed, _more_than_simulated(needed)
                    )
                continue
            start = starts.get(wc.first_job)
            if start is not None and start.decided:
                starts_it = start.starter is not None
            else:
                starts_it = pull_would_start(session, name, wc.first_job, policy)
            if starts_it:
                runs[category.id] = Runs(category.id, size, (), False)
    return Simulated(template, capacity, runs)


def _per_node(session: Session, category_id: int) -> dict[str, int]:
    return node_needs(session, [category_id]).get(category_id, {})
