"""The coarse filter of the scheduler's allocation, in SQL: which workers could hold a
jobspec at all, from their free counts per type (inventory_counts) and the category's
per-node needs, before any tree is built."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import (
    ColumnElement,
    ColumnExpressionArgument,
    FromClause,
    exists,
    or_,
)

from app.db.models import (
    CategoryNodeNeed,
    CategoryShape,
    InventoryCount,
    Worker,
    WorkerInventory,
)
from app.db.tables import (
    INVENTORY_VERTICES,
)


def has_room(
    category_id: ColumnExpressionArgument[int] | int, worker_id: ColumnExpressionArgument[int] | int
) -> ColumnElement[bool]:
    """The worker's free counts cover every per-node need of the category (coarse)."""
    # Correlate explicitly: SQLAlchemy's automatic correlation stops at the enclosing
    # SELECT, and the inner EXISTS would get a FROM of its own for the outer worker table
    # (then every worker passed as soon as any worker had room).
    return ~exists().where(
        CategoryNodeNeed.category_id == category_id,
        ~exists()
        .where(
            InventoryCount.worker_id == worker_id,
            InventoryCount.type == CategoryNodeNeed.type,
            InventoryCount.unit == CategoryNodeNeed.unit,
            InventoryCount.free >= CategoryNodeNeed.amount,
        )
        .correlate_except(InventoryCount),
    )


def single_node(category_id: ColumnExpressionArgument[int] | int) -> ColumnElement[bool]:
    """The category's jobs can run on one node (pull dispatch gives only those)."""
    return ~exists().where(CategoryShape.category_id == category_id, CategoryShape.min_nodes > 1)


def _touched(vertex: FromClause) -> ColumnElement[bool]:
    return or_(vertex.c.held_by.is_not(None), vertex.c.shared > 0, vertex.c.used > 0)


@lru_cache(maxsize=256)
def whole_room(types: frozenset[str]) -> tuple[ColumnElement[bool], ...]:
    """Conditions that the worker (``Worker.id``) has an entirely free vertex of each type
    (nothing held, shared or drawn in its subtree), what exclusive requests need
    (allocation.whole_types): the node by its untouched counter, other types by their rows.
    Built once per set of types (building the expressions costs more than running them)."""
    conditions: list[ColumnElement[bool]] = []
    for type_ in sorted(types):
        if type_ == "node":
            conditions.append(
                exists()
                .where(
                    WorkerInventory.worker_id == Worker.id,
                    WorkerInventory.untouched == WorkerInventory.vertices,
                )
                .correlate_except(WorkerInventory)
            )
            continue
        table = INVENTORY_VERTICES
        top = table.alias("whole_top")
        inner = table.alias("whole_inner")
        conditions.append(
            exists()
            .where(
                top.c.worker_id == Worker.id,
                top.c.type == type_,
                ~_touched(top),
                ~exists()
                .where(
                    inner.c.worker_id == top.c.worker_id,
                    inner.c.position > top.c.position,
                    inner.c.position <= top.c.last_position,
                    _touched(inner),
                )
                .correlate_except(inner),
            )
            .correlate_except(top)
        )
    return tuple(conditions)
