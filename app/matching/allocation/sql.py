"""The inventory's part of the misfit cache: a worker whose whole inventory could never
hold, on one node, what a category's jobspec needs per node (totals, not free counts).

Workers without an inventory are not managed: a jobspec never rules them out.
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import and_, exists

from app.db.models import Category, CategoryNodeNeed, InventoryCount, Worker, WorkerInventory
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause

REASONS = {
    "inventory-too-small": "the worker's whole inventory is smaller than what the job needs "
    "on one node",
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
    return ((too_small, "inventory-too-small"),)


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _inventory_clauses(pair.category, pair.worker)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
