"""Worker inventories in SQL: storing them as vertex rows, free counts per type per worker
(the coarse filter), trees for the allocator (app/matching/allocation.py) built from the
rows of the workers that pass, and booking and releasing what a placement selected.

Booking is a conditional UPDATE per vertex set (``held_by IS NULL AND shared = 0 AND used =
0`` for an exclusive subtree), so two transactions can never both book one vertex: the
loser's UPDATE matches fewer rows and it raises instead of overlapping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from sqlalchemy import (
    ColumnElement,
    ColumnExpressionArgument,
    and_,
    case,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import (
    CategoryNodeNeed,
    CategoryShape,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Job,
    Worker,
    WorkerInventory,
)
from app.matching.allocation import (
    Key,
    Placement,
    Request,
    Vertex,
    min_nodes,
    node_needs,
    upper_tree,
)
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.inventory_spec import Inventory, parse_inventory
from app.notations.errors import NotationError
from app.notations.idset import encode_idset


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


def recount(session: Session, *worker_ids: int) -> None:
    """Recompute the workers' free counts and untouched vertices from their vertex rows
    (a few statements for any number of workers)."""
    if not worker_ids:
        return
    ids = sorted(set(worker_ids))
    v = InventoryVertex
    unit = func.coalesce(v.unit, "")
    rows = session.execute(
        select(
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
        )
        .where(v.worker_id.in_(ids))
        .group_by(v.worker_id, v.type, unit)
    ).all()
    session.execute(delete(InventoryCount).where(InventoryCount.worker_id.in_(ids)))
    if rows:
        session.execute(
            insert(InventoryCount),
            [
                {"worker_id": w, "type": t, "unit": u, "total": total, "free": free}
                for w, t, u, total, free in rows
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


# -- categories ----------------------------------------------------------------------------


def store_category_needs(session: Session, category_id: int, requests: Sequence[Request]) -> None:
    needs = node_needs(requests)
    if needs:
        session.execute(
            insert(CategoryNodeNeed),
            [
                {"category_id": category_id, "type": t, "unit": u or "", "amount": n}
                for (t, u), n in needs.items()
            ],
        )
    session.add(CategoryShape(category_id=category_id, min_nodes=min_nodes(requests)))


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


# -- trees -----------------------------------------------------------------------------------


def _vertex(row: InventoryVertex, worker: str | None, rank: int | None) -> Vertex:
    return Vertex(
        row.id,
        row.type,
        row.logical_id if row.position else (rank if rank is not None else 0),
        unit=row.unit,
        size=row.size,
        used=row.used,
        held=row.held_by is not None,
        shared=row.shared,
        worker=worker,
        rank=rank,
    )


def _load_children(session: Session, worker_id: int, node: Vertex) -> list[Vertex]:
    rows = session.scalars(
        select(InventoryVertex)
        .where(InventoryVertex.worker_id == worker_id, InventoryVertex.position > 0)
        .order_by(InventoryVertex.position)
    ).all()
    built: dict[int, Vertex] = {}
    kids: dict[int, list[Vertex]] = {0: []}
    for row in rows:
        built[row.position] = _vertex(row, node.worker, node.rank)
        kids[row.position] = []
    for row in rows:
        kids[row.parent_position or 0].append(built[row.position])
    for position in sorted(built, reverse=True):
        vertex = built[position]
        vertex._adopt(kids[position])
    return kids[0]


def _loader(session: Session, worker_id: int, node: Vertex) -> Callable[[], list[Vertex]]:
    return lambda: _load_children(session, worker_id, node)


def worker_tree(session: Session, worker_ids: Sequence[int]) -> Vertex:
    """The cluster tree of the given workers (nodes lazy, in the given order)."""
    if not worker_ids:
        return upper_tree([], [])
    rows = session.execute(
        select(Worker.id, Worker.name, Worker.rank, WorkerInventory, InventoryVertex)
        .join(WorkerInventory, WorkerInventory.worker_id == Worker.id)
        .join(
            InventoryVertex,
            and_(InventoryVertex.worker_id == Worker.id, InventoryVertex.position == 0),
        )
        .where(Worker.id.in_(worker_ids))
    ).all()
    counts: dict[int, dict[Key, int]] = {}
    for worker_id, type_, unit, free in session.execute(
        select(
            InventoryCount.worker_id, InventoryCount.type, InventoryCount.unit, InventoryCount.free
        ).where(InventoryCount.worker_id.in_(worker_ids))
    ):
        counts.setdefault(worker_id, {})[(type_, unit or None)] = free
    by_id = {row[0]: row for row in rows}
    nodes: list[Vertex] = []
    chains: list[tuple[tuple[str, str], ...]] = []
    for worker_id in worker_ids:
        if worker_id not in by_id:
            continue
        _, name, rank, inventory, node_row = by_id[worker_id]
        summary = (counts.get(worker_id, {}), inventory.untouched == inventory.vertices)
        node = Vertex(
            node_row.id,
            "node",
            rank if rank is not None else 0,
            held=node_row.held_by is not None,
            shared=node_row.shared,
            worker=name,
            rank=rank,
            loader=None,
            summary=summary,
        )
        node.loader = _loader(session, worker_id, node)
        nodes.append(node)
        chains.append(tuple((t, i) for t, i in json.loads(inventory.upper)))
    return upper_tree(nodes, chains)


# -- booking ---------------------------------------------------------------------------------


def _places(session: Session, vertex_ids: Sequence[int]) -> dict[int, tuple[int, int, int]]:
    """Worker, position and last position of each vertex (one query)."""
    places: dict[int, tuple[int, int, int]] = {}
    unique = sorted(set(vertex_ids))
    for chunk in range(0, len(unique), 500):
        for vertex_id, worker_id, first, last in session.execute(
            select(
                InventoryVertex.id,
                InventoryVertex.worker_id,
                InventoryVertex.position,
                InventoryVertex.last_position,
            ).where(InventoryVertex.id.in_(unique[chunk : chunk + 500]))
        ):
            places[vertex_id] = (worker_id, first, last)
    return places


def _runs(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent position ranges merged (the cores of one socket are one run)."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and merged[-1][1] + 1 == first:
            merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged


def book(session: Session, job: Job, placement: Placement) -> list[int]:
    """Book what the placement selected for the job; the worker ids touched. Raises
    ConflictError (and the transaction must roll back) when a vertex was taken meanwhile.

    Exclusive subtrees are booked with one conditional UPDATE per worker over the merged
    position ranges: it must change every row of them, or some row was taken."""
    bookings = placement.bookings()
    places = _places(session, [b.vertex.key for b in bookings])
    v = InventoryVertex
    exclusive: dict[int, list[tuple[int, int]]] = {}
    rows = []
    for booking in bookings:
        worker_id, first, last = places[booking.vertex.key]
        if booking.mode == "exclusive":
            exclusive.setdefault(worker_id, []).append((first, last))
        else:
            if booking.mode == "shared":
                statement = (
                    update(v)
                    .where(v.id == booking.vertex.key, v.held_by.is_(None))
                    .values(shared=v.shared + 1)
                )
            else:
                statement = (
                    update(v)
                    .where(
                        v.id == booking.vertex.key,
                        v.held_by.is_(None),
                        v.used + booking.amount <= v.size,
                    )
                    .values(used=v.used + booking.amount)
                )
            if session.execute(statement).rowcount != 1:  # type: ignore[attr-defined]
                raise ConflictError(f"job {job.id}: resources were taken by another job; retry")
        rows.append(
            {
                "job_id": job.id,
                "vertex_id": booking.vertex.key,
                "worker_id": worker_id,
                "mode": booking.mode,
                "amount": booking.amount,
            }
        )
    for worker_id, ranges in sorted(exclusive.items()):
        runs = _runs(ranges)
        result = session.execute(
            update(v)
            .where(
                v.worker_id == worker_id,
                or_(*(v.position.between(first, last) for first, last in runs)),
                v.held_by.is_(None),
                v.shared == 0,
                v.used == 0,
            )
            .values(held_by=job.id)
        )
        if result.rowcount != sum(last - first + 1 for first, last in runs):  # type: ignore[attr-defined]
            raise ConflictError(f"job {job.id}: resources were taken by another job; retry")
    if rows:
        session.execute(insert(InventoryBooking), rows)
    touched = sorted({places[b.vertex.key][0] for b in bookings})
    recount(session, *touched)
    return touched


def release(session: Session, job: Job) -> None:
    """Free everything the job holds in inventories: its exclusive holds in one UPDATE,
    shared holds and draws one by one."""
    bookings = session.execute(
        select(
            InventoryBooking.id,
            InventoryBooking.vertex_id,
            InventoryBooking.worker_id,
            InventoryBooking.mode,
            InventoryBooking.amount,
        )
        .where(InventoryBooking.job_id == job.id, _active())
        .order_by(InventoryBooking.vertex_id)
        .with_for_update()
    ).all()
    if not bookings:
        return
    v = InventoryVertex
    touched = sorted({b.worker_id for b in bookings})
    if any(b.mode == "exclusive" for b in bookings):
        session.execute(
            update(v).where(v.worker_id.in_(touched), v.held_by == job.id).values(held_by=None)
        )
    for b in bookings:
        if b.mode == "shared":
            session.execute(update(v).where(v.id == b.vertex_id).values(shared=v.shared - 1))
        elif b.mode == "draw":
            session.execute(update(v).where(v.id == b.vertex_id).values(used=v.used - b.amount))
    session.execute(
        update(InventoryBooking)
        .where(InventoryBooking.job_id == job.id, _active())
        .values(released_at=utcnow())
    )
    recount(session, *touched)


def job_r(session: Session, job_id: int) -> list[dict[str, object]]:
    """RFC 20-like R of the job's active bookings: per node its rank, name, the ids of each
    leaf type as an idset, and the amounts drawn from pools."""
    bookings = session.execute(
        select(InventoryBooking, InventoryVertex)
        .join(InventoryVertex, InventoryVertex.id == InventoryBooking.vertex_id)
        .where(InventoryBooking.job_id == job_id, _active())
    ).all()
    per_worker: dict[int, tuple[dict[str, set[int]], dict[str, dict[str, int]]]] = {}
    for booking, vertex in bookings:
        ids, pools = per_worker.setdefault(booking.worker_id, ({}, {}))
        if booking.mode == "draw":
            amounts = pools.setdefault(vertex.type, {})
            amounts[vertex.unit or ""] = amounts.get(vertex.unit or "", 0) + booking.amount
            continue
        if booking.mode == "exclusive":
            inside = session.scalars(
                select(InventoryVertex).where(
                    InventoryVertex.worker_id == booking.worker_id,
                    InventoryVertex.position.between(vertex.position, vertex.last_position),
                )
            ).all()
        else:
            inside = [vertex]
        for row in inside:
            if row.unit is not None:
                amounts = pools.setdefault(row.type, {})
                amounts[row.unit] = amounts.get(row.unit, 0) + row.size
            elif row.last_position == row.position and row.type != "node":
                ids.setdefault(row.type, set()).add(row.logical_id)
    workers = {
        w.id: w for w in session.scalars(select(Worker).where(Worker.id.in_(list(per_worker))))
    }
    out: list[dict[str, object]] = []
    for worker_id, (ids, pools) in sorted(
        per_worker.items(), key=lambda e: (workers[e[0]].rank or 0, workers[e[0]].name)
    ):
        item: dict[str, object] = {
            "rank": workers[worker_id].rank,
            "node": workers[worker_id].name,
            "children": {t: encode_idset(sorted(s)) for t, s in sorted(ids.items())},
        }
        if pools:
            item["pools"] = {t: dict(sorted(u.items())) for t, u in sorted(pools.items())}
        out.append(item)
    return out
