"""New workers of a template, registered for real in a savepoint that is rolled back, and
what the real services say they would do: whether the misfit cache lets one run a
category (a submission's rule), whether a pull by one would start a category's first job
(``would_start``, the pull's own steps), and for a job on several nodes how many new
workers an allocation now needs (``placement_now``). Nothing of it is stored."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import InventoryCount, Job, QueueInstance
from app.matching.allocation import allocate
from app.matching.allocation.allocator import Policy
from app.matching.demand.answers import pull_would_start
from app.matching.demand.need import job_slots, node_needs, vertex_name
from app.matching.demand.sandbox import rolled_back
from app.matching.demand.templates import Template, register_simulated
from app.matching.demand.waiting import WaitingCategory

#: The dimension of a job's slots in a packing (vertices are named by their type).
SLOTS = "slots"


@dataclass(frozen=True)
class Runs:
    """A template's new workers against one category: a new worker can start its jobs;
    ``size`` is what one job books on one of them; ``first_new`` how many new workers the
    first job needs (several only for a job on several nodes)."""

    category_id: int
    size: dict[str, int]
    first_new: int


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


def _new_nodes(
    session: Session, template: Template, job: Job, nodes: int, policy: Policy
) -> int | None:
    """How many new workers of the template (one is registered already) let an
    allocation now place the job on several nodes; None: not even ``nodes`` of them, or
    more than the template's maximum."""
    most = nodes if template.max_count is None else min(nodes, template.max_count)
    if most < 1:
        return None
    with rolled_back(session):
        for count in range(1, most + 1):
            if count > 1:
                register_simulated(session, template, count)
            placed = allocate.placement_now(session, session.get(Job, job.id) or job, policy)
            if placed is not None:
                return count
    return None


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
        for wc in targets:
            job = session.get(Job, wc.first_job)
            if job is None or (template.max_count is not None and template.max_count < 1):
                continue
            category = wc.category
            size = {SLOTS: job_slots(category)}
            if has_inventory:
                size.update(_per_node(session, category.id))
            if wc.nodes > 1:
                first_new = _new_nodes(session, template, job, wc.nodes, policy)
                if first_new is not None:
                    runs[category.id] = Runs(category.id, size, first_new)
                continue
            if pull_would_start(session, name, job.id, policy):
                runs[category.id] = Runs(category.id, size, 1)
    return Simulated(template, capacity, runs)


def _per_node(session: Session, category_id: int) -> dict[str, int]:
    return node_needs(session, [category_id]).get(category_id, {})
