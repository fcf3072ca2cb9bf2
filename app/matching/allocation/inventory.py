"""Worker inventories in SQL: storing them as vertex rows and keeping the free counts per
type per worker that the coarse filter reads (app/matching/allocation/coarse_filter.py).
Trees for the allocator are built in trees.py, bookings made and released in bookings.py,
the R of a job's bookings rendered in r.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    case,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from app.db.models import (
    CategoryNodeNeed,
    CategoryShape,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Worker,
    WorkerInventory,
)
from app.db.tables import (
    INVENTORY_COUNTS,
    WORKER_INVENTORIES,
)
from app.matching.allocation.spec import Inventory, parse_inventory
from app.matching.allocation.vertex_requests import (
    VertexRequest,
    cores_alone,
    min_nodes,
    node_needs,
)
from app.matching.errors import InvalidFieldError
from app.notations.errors import NotationError


def parse_worker_inventory(value: str | list[object]) -> Inventory:
    try:
        return parse_inventory(value)
    except NotationError as error:
        raise InvalidFieldError("inventory", str(error), error) from error


def store_inventory(
    session: Session, worker_id: int, value: str | list[object] | None, parsed: Inventory | None
) -> bool:
    """Replace the worker's inventory rows; True when anything changed. Refused while any
    of its vertices is booked."""
    text = None if value is None else value if isinstance(value, str) else json.dumps(value)
    current = session.get(WorkerInventory, worker_id)
    if (current.inventory if current else None) == text:
        return False
    busy = session.scalar(
        select(exists().where(InventoryBooking.worker_id == worker_id, _active()))
    )
    if busy:
        raise InvalidFieldError("inventory", "the worker's inventory is in use by running jobs")
    session.execute(delete(InventoryVertex).where(InventoryVertex.worker_id == worker_id))
    session.execute(delete(InventoryCount).where(InventoryCount.worker_id == worker_id))
    if current is not None:
        session.delete(current)
        session.flush()
    if parsed is None or text is None:
        return True
    last = _last_positions(parsed)
    session.execute(
        insert(InventoryVertex),
        [
            {
                "worker_id": worker_id,
                "position": v.position,
                "last_position": last[v.position],
                "parent_position": v.parent,
                "depth": v.depth,
                "type": v.type,
                "logical_id": v.index,
                "unit": v.unit,
                "size": v.size,
                "used": 0,
                "shared": 0,
            }
            for v in parsed.vertices
        ],
    )
    session.add(
        WorkerInventory(
            worker_id=worker_id,
            inventory=text,
            syntax="shape" if isinstance(value, str) else "rfc14",
            upper=parsed.upper_json(),
            vertices=len(parsed.vertices),
            untouched=len(parsed.vertices),
            rank=session.scalar(select(Worker.rank).where(Worker.id == worker_id)),
        )
    )
    session.flush()
    recount(session, worker_id)
    return True


def _last_positions(parsed: Inventory) -> dict[int, int]:
    last = {v.position: v.position for v in parsed.vertices}
    for v in reversed(parsed.vertices):
        if v.parent is not None:
            last[v.parent] = max(last[v.parent], last[v.position])
    return last


def _active() -> ColumnElement[bool]:
    return InventoryBooking.released_at.is_(None)


def counts_of_vertices() -> Select[*tuple[Any, ...]]:
    """What each worker's free counts must hold, from its vertex rows: worker, type, unit
    ("" for discrete vertices), total, free and span, one row per (worker, type, unit)
    (recount writes them; the inventory invariants compare them)."""
    v = InventoryVertex
    unit = func.coalesce(v.unit, "")
    return select(
        v.worker_id,
        v.type,
        unit,
        func.sum(case((v.unit.is_(None), 1), else_=v.size)),
        func.sum(
            case(
                (v.held_by.is_not(None), 0),
                (v.unit.is_(None), 1),
                else_=v.size - v.used,
            )
        ),
        func.min(v.last_position - v.position + 1),
    ).group_by(v.worker_id, v.type, unit)


def recount(session: Session, *worker_ids: int) -> None:
    """Recompute the workers' free counts (with their spans) and untouched vertices from
    their vertex rows (a few statements for any number of workers)."""
    if not worker_ids:
        return
    ids = sorted(set(worker_ids))
    v = InventoryVertex
    rows = session.execute(counts_of_vertices().where(v.worker_id.in_(ids))).all()
    ranks = dict(session.execute(select(Worker.id, Worker.rank).where(Worker.id.in_(ids))).all())
    session.execute(delete(InventoryCount).where(InventoryCount.worker_id.in_(ids)))
    if rows:
        session.execute(
            insert(InventoryCount),
            [
                {
                    "worker_id": w,
                    "type": t,
                    "unit": u,
                    "total": total,
                    "free": free,
                    "rank": ranks.get(w),
                    "span": span,
                }
                for w, t, u, total, free, span in rows
            ],
        )
    untouched = dict.fromkeys(ids, 0)
    for worker_id, count in session.execute(
        select(v.worker_id, func.count())
        .where(v.worker_id.in_(ids), v.held_by.is_(None), v.shared == 0, v.used == 0)
        .group_by(v.worker_id)
    ):
        untouched[worker_id] = count
    for worker_id in ids:
        session.execute(
            update(WorkerInventory)
            .where(WorkerInventory.worker_id == worker_id)
            .values(untouched=untouched[worker_id])
        )


def set_rank(session: Session, worker_id: int, rank: int | None) -> None:
    """Copy the worker's rank onto its inventory and free counts, whose room indexes
    order by it (the scheduler's ``first`` order); every writer of ``Worker.rank`` calls
    this."""
    for table in (WORKER_INVENTORIES, INVENTORY_COUNTS):
        session.execute(
            update(table)
            .where(table.c.worker_id == worker_id, table.c.rank.is_distinct_from(rank))
            .values(rank=rank)
        )


def store_category_needs(
    session: Session, category_id: int, requests: Sequence[VertexRequest]
) -> None:
    needs = node_needs(requests)
    if needs:
        session.execute(
            insert(CategoryNodeNeed),
            [
                {"category_id": category_id, "type": t, "unit": u or "", "amount": n}
                for (t, u), n in needs.items()
            ],
        )
    session.add(
        CategoryShape(
            category_id=category_id,
            min_nodes=min_nodes(requests),
            cores_alone=cores_alone(requests),
        )
    )
