"""The inventory's part of the misfit cache: a worker whose whole inventory could never
hold, on one node, what a category's jobspec needs per node (totals, not free counts).

A worker without an inventory offers ``node/[core=<slots>]`` and nothing else (issue 35),
``<slots>`` being its largest queue instance's: a jobspec that asks for anything but cores
(a GPU, a memory pool), for more cores than that, or for several nodes (which only an
allocation on workers with inventories places) never runs there. Jobs without a jobspec
are not concerned.
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import and_, exists, func, or_, select

from app.db.models import (
    Category,
    CategoryNodeNeed,
    CategoryShape,
    InventoryCount,
    QueueInstance,
    Worker,
    WorkerInventory,
)
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause

REASONS = {
    "needs-several-nodes": "the job needs several nodes: a worker without an inventory takes "
    "part in no allocation, and fewer workers than it needs could hold a node of it",
    "inventory-too-small": "the worker's whole inventory is smaller than what the job needs "
    "on one node (a worker without an inventory offers node/[core=<slots>] and nothing else)",
}


@lru_cache(maxsize=8)
def _inventory_clauses(category: type[Category], worker: type[Worker]) -> tuple[ReasonClause, ...]:
    """Built once per pair of entities: expressions are immutable."""
    too_small = and_(
        exists().where(WorkerInventory.worker_id == worker.id),
        exists().where(
            CategoryNodeNeed.category_id == category.id,
            ~exists()
            .where(
                InventoryCount.worker_id == worker.id,
                InventoryCount.type == CategoryNodeNeed.type,
                InventoryCount.unit == CategoryNodeNeed.unit,
                InventoryCount.total >= CategoryNodeNeed.amount,
            )
            .correlate_except(InventoryCount),
        ),
    )
    no_inventory = ~exists().where(WorkerInventory.worker_id == worker.id)
    largest_slots = (
        select(func.coalesce(func.max(QueueInstance.slots), 0))
        .where(QueueInstance.worker_id == worker.id)
        .scalar_subquery()
    )
    several_nodes = and_(
        no_inventory,
        exists().where(CategoryShape.category_id == category.id, CategoryShape.min_nodes > 1),
    )
    beyond_cores = and_(
        no_inventory,
        exists().where(
            CategoryShape.category_id == category.id,
            or_(CategoryShape.cores_alone.is_(None), CategoryShape.cores_alone > largest_slots),
        ),
    )
    # One clause per code: a provider declares each code it emits once (test_misfits).
    return (
        (several_nodes, "needs-several-nodes"),
        (or_(too_small, beyond_cores), "inventory-too-small"),
    )


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _inventory_clauses(pair.category, pair.worker)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
