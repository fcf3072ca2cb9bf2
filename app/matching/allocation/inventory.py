"""Worker inventories in SQL: storing them as vertex rows, free counts per type per worker
(the coarse filter), trees for the allocator (app/matching/allocation/allocator.py) built from the
rows of the workers that pass, and booking and releasing what a placement selected.

Booking is a conditional UPDATE per vertex set (``held_by IS NULL AND shared = 0 AND used =
0`` for an exclusive subtree), so two transactions can never both book one vertex: the
loser's UPDATE matches fewer rows and it raises instead of overlapping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ColumnExpressionArgument,
    FromClause,
    Select,
    and_,
    bindparam,
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
from app.db.tables import (
    INVENTORY_BOOKINGS,
    INVENTORY_COUNTS,
    INVENTORY_VERTICES,
    WORKER_INVENTORIES,
)
from app.matching.allocation.allocator import (
    Key,
    Placement,
    Vertex,
    VertexRequest,
    min_nodes,
    node_needs,
    upper_tree,
)
from app.matching.allocation.spec import Inventory, parse_inventory
from app.matching.errors import ConflictError, InvalidFieldError
from app.notations.errors import NotationError
from app.notations.flux.idset import encode_idset

# Core tables for the statements that need neither ORM objects nor ORM synchronisation.


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


# -- categories ----------------------------------------------------------------------------


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


# -- trees -----------------------------------------------------------------------------------


_TREE_COLUMNS = (
    INVENTORY_VERTICES.c.id,
    INVENTORY_VERTICES.c.worker_id,
    INVENTORY_VERTICES.c.position,
    INVENTORY_VERTICES.c.last_position,
    INVENTORY_VERTICES.c.parent_position,
    INVENTORY_VERTICES.c.type,
    INVENTORY_VERTICES.c.logical_id,
    INVENTORY_VERTICES.c.unit,
    INVENTORY_VERTICES.c.size,
    INVENTORY_VERTICES.c.used,
    INVENTORY_VERTICES.c.held_by,
    INVENTORY_VERTICES.c.shared,
)

#: The rows below the nodes of some workers (built once: building a statement costs more
#: than running it).
_BELOW_NODES = (
    select(*_TREE_COLUMNS)
    .where(
        INVENTORY_VERTICES.c.worker_id.in_(bindparam("worker_ids", expanding=True)),
        INVENTORY_VERTICES.c.position > 0,
    )
    .order_by(INVENTORY_VERTICES.c.worker_id, INVENTORY_VERTICES.c.position)
)

#: The free counts of some workers, the summaries of their nodes until they are loaded.
_FREE_COUNTS = select(
    INVENTORY_COUNTS.c.worker_id,
    INVENTORY_COUNTS.c.type,
    INVENTORY_COUNTS.c.unit,
    INVENTORY_COUNTS.c.free,
).where(INVENTORY_COUNTS.c.worker_id.in_(bindparam("worker_ids", expanding=True)))


#: The worker's and its inventory's columns of :func:`node_select`, named.
NODE_WORKER_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("id", Worker.id),
    ("name", Worker.name),
    ("rank", Worker.rank),
    ("upper", WorkerInventory.upper),
    ("untouched", WorkerInventory.untouched),
    ("vertices", WorkerInventory.vertices),
)
#: Its node vertex's columns.
_NODE_VERTEX_COLUMNS = (
    InventoryVertex.id,
    InventoryVertex.held_by,
    InventoryVertex.shared,
    InventoryVertex.last_position,
)


def node_select() -> Select[*tuple[Any, ...]]:
    """What a tree needs of each worker's node, one row per worker with an inventory:
    the columns :func:`tree_of` reads, for callers to filter, order and limit."""
    return (
        select(*(column for _, column in NODE_WORKER_COLUMNS), *_NODE_VERTEX_COLUMNS)
        .join(WorkerInventory, WorkerInventory.worker_id == Worker.id)
        .join(
            InventoryVertex,
            and_(InventoryVertex.worker_id == Worker.id, InventoryVertex.position == 0),
        )
    )


def node_select_of(workers: FromClause, *extra: Any) -> Select[*tuple[Any, ...]]:
    """The rows of :func:`node_select` (then ``extra``) of the workers of a subquery that
    carries NODE_WORKER_COLUMNS under their names: only their node vertices are joined."""
    return (
        select(*(workers.c[name] for name, _ in NODE_WORKER_COLUMNS), *_NODE_VERTEX_COLUMNS)
        .add_columns(*extra)
        .select_from(workers)
        .join(
            InventoryVertex,
            and_(InventoryVertex.worker_id == workers.c.id, InventoryVertex.position == 0),
        )
    )


_NODES_OF = node_select().where(Worker.id.in_(bindparam("worker_ids", expanding=True)))


class _Loader:
    """Loads the rows below the node of lazy workers, several workers per query: the one
    the allocator looks into and the next ``batch - 1`` not yet loaded in the tree's order
    (a job of N nodes usually looks into the first N survivors)."""

    def __init__(
        self,
        session: Session,
        nodes: dict[int, Vertex],
        batch: int,
        prefetched: dict[int, list[Any]],
    ) -> None:
        self.session = session
        self.nodes = nodes
        self.order = list(nodes)
        self.batch = max(1, batch)
        self.loaded: dict[int, list[Vertex]] = {}
        self.prefetched = prefetched

    def for_worker(self, worker_id: int) -> Callable[[], list[Vertex]]:
        return lambda: self.children(worker_id)

    def children(self, worker_id: int) -> list[Vertex]:
        rows = self.prefetched.pop(worker_id, None)
        if rows is not None:
            # Position order, as _BELOW_NODES gives them (JSON aggregates keep none).
            rows.sort(key=lambda row: row[2])
            return _build_children(rows, self.nodes[worker_id])
        if worker_id not in self.loaded:
            at = self.order.index(worker_id)
            following = [
                w
                for w in self.order[at + 1 :]
                if w not in self.loaded
                and w not in self.prefetched
                and self.nodes[w].loader is not None
            ]
            wanted = [worker_id, *following[: self.batch - 1]]
            found: dict[int, list[Any]] = {w: [] for w in wanted}
            for row in self.session.connection().execute(_BELOW_NODES, {"worker_ids": wanted}):
                found[row[1]].append(row)
            for w, below in found.items():
                self.loaded[w] = _build_children(below, self.nodes[w])
        return self.loaded.pop(worker_id)


def _build_children(rows: Sequence[Any], node: Vertex) -> list[Vertex]:
    """The vertices below a node from its rows, each told where it lies. The rows come in
    position order (parents before children), so walking them backwards builds every
    vertex after its children, and each vertex sums its children's free units once.
    Rows are unpacked once: attribute access on them is slow."""
    kids: dict[int, list[Vertex]] = {}
    worker, rank = node.worker, node.rank
    built = Vertex.built
    for (
        vertex_id,
        worker_id,
        position,
        last_position,
        parent,
        type_,
        logical_id,
        unit,
        size,
        used,
        held_by,
        shared,
    ) in reversed(rows):
        children = kids.pop(position, [])
        children.reverse()
        vertex = built(
            vertex_id,
            type_,
            logical_id,
            unit,
            size,
            used,
            held_by is not None,
            shared,
            worker,
            rank,
            children,
            (worker_id, position, last_position),
        )
        kids.setdefault(parent or 0, []).append(vertex)
    top = kids.get(0, [])
    top.reverse()
    return top


def worker_tree(session: Session, worker_ids: Sequence[int], *, batch: int = 1) -> Vertex:
    """The cluster tree of the given workers (nodes lazy, in the given order; the rows
    below the nodes are loaded ``batch`` workers per query, when first looked into)."""
    if not worker_ids:
        return upper_tree([], [])
    session.flush()
    by_id = {
        row[0]: row
        for row in session.connection().execute(_NODES_OF, {"worker_ids": list(worker_ids)})
    }
    return tree_of(session, [by_id[w] for w in dict.fromkeys(worker_ids) if w in by_id], batch)


def free_counts_column(functions: tuple[str, str], worker_id: Any = Worker.id) -> Any:
    """The free counts of the worker ``worker_id`` as one JSON array of [type, unit, free]
    (``functions``: dialect.json_rows_function), for queries of node_select rows that
    carry their nodes' summaries instead of a query of _FREE_COUNTS after them."""
    aggregate, row = (getattr(func, name) for name in functions)
    counts = INVENTORY_COUNTS.c
    return (
        select(aggregate(row(counts.type, counts.unit, counts.free)))
        .where(counts.worker_id == worker_id)
        .correlate_except(INVENTORY_COUNTS)
        .scalar_subquery()
        .label("free_counts")
    )


def rows_below_column(functions: tuple[str, str], worker_id: Any = Worker.id) -> Any:
    """The rows below the node of the worker ``worker_id`` (the columns of _BELOW_NODES)
    as one JSON array, in no particular order: queries of node_select rows may carry them
    for the workers the allocator will look into first (a round trip less)."""
    aggregate, row = (getattr(func, name) for name in functions)
    vertices = INVENTORY_VERTICES.alias("below")
    return (
        select(aggregate(row(*(vertices.c[c.key] for c in _TREE_COLUMNS))))
        .where(vertices.c.worker_id == worker_id, vertices.c.position > 0)
        .correlate_except(vertices)
        .scalar_subquery()
    )


def parse_rows_below(value: Any) -> list[Any] | None:
    """The rows of a :func:`rows_below_column` value (None when it was not fetched)."""
    if value is None:
        return None
    rows: list[Any] = json.loads(value) if isinstance(value, str) else value
    return rows


def parse_free_counts(value: Any) -> dict[Key, int]:
    """The summary of a :func:`free_counts_column` value (a list from psycopg, JSON text
    from SQLite, None for a worker without counts)."""
    items = json.loads(value) if isinstance(value, str) else value or ()
    return {(type_, unit or None): free for type_, unit, free in items}


def tree_of(
    session: Session,
    rows: Sequence[Any],
    batch: int = 1,
    counts: dict[int, dict[Key, int]] | None = None,
    prefetched: dict[int, list[Any]] | None = None,
) -> Vertex:
    """The cluster tree of the workers whose rows of :func:`node_select` are given (nodes
    lazy, in the rows' order, each worker once); ``counts``: their free counts, when the
    rows came with them (else one query reads them); ``prefetched``: the rows below the
    node of some of them (:func:`rows_below_column`), which need no query."""
    if not rows:
        return upper_tree([], [])
    if counts is None:
        counts = {}
        for worker_id, type_, unit, free in session.connection().execute(
            _FREE_COUNTS, {"worker_ids": [row[0] for row in rows]}
        ):
            counts.setdefault(worker_id, {})[(type_, unit or None)] = free
    nodes: dict[int, Vertex] = {}
    chains: list[tuple[tuple[str, str], ...]] = []
    for row in rows:
        worker_id, name, rank, upper, untouched, vertices, node_id, held_by, shared, last = row
        if worker_id in nodes:
            continue
        nodes[worker_id] = Vertex(
            node_id,
            "node",
            rank if rank is not None else 0,
            held=held_by is not None,
            shared=shared,
            worker=name,
            rank=rank,
            loader=None,
            summary=(counts.get(worker_id, {}), untouched == vertices),
            place=(worker_id, 0, last),
        )
        chains.append(tuple((t, i) for t, i in json.loads(upper)))
    loader = _Loader(session, nodes, batch, dict(prefetched or {}))
    for worker_id, node in nodes.items():
        node.loader = loader.for_worker(worker_id)
    return upper_tree(list(nodes.values()), chains)


# -- booking ---------------------------------------------------------------------------------


def _places(session: Session, vertices: Sequence[Vertex]) -> dict[int, tuple[int, int, int]]:
    """Worker, position and last position of each vertex: where the tree recorded it, and
    one query for the vertices it did not (trees not built from rows)."""
    places = {v.key: v.place for v in vertices if v.place is not None}
    unique = sorted({v.key for v in vertices if v.place is None})
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


#: Changes of free units per (worker, type, unit) and of untouched vertices per worker.
_FreeDelta = dict[tuple[int, str, str], int]
_UntouchedDelta = dict[int, int]


def _units(unit: str | None, size: int) -> int:
    """Free units one entirely free vertex counts for: 1, or the size of a pool."""
    return 1 if unit is None else size


def _conflict(job: Job) -> ConflictError:
    return ConflictError(f"job {job.id}: resources were taken by another job; retry")


_v = INVENTORY_VERTICES.c

#: Shared holds on vertices not held exclusively; the rows changed.
_SHARE = (
    update(INVENTORY_VERTICES)
    .where(_v.id.in_(bindparam("vertex_ids", expanding=True)), _v.held_by.is_(None))
    .values(shared=_v.shared + 1)
    .returning(_v.id, _v.shared, _v.used)
)

#: An amount drawn from a pool that has it.
_DRAW = (
    update(INVENTORY_VERTICES)
    .where(
        _v.id == bindparam("vertex_id"),
        _v.held_by.is_(None),
        _v.used + bindparam("amount") <= _v.size,
    )
    .values(used=_v.used + bindparam("amount"))
    .returning(_v.type, _v.unit, _v.shared, _v.used)
)

#: An exclusive hold on a run of positions of one worker, every row entirely free.
_HOLD = (
    update(INVENTORY_VERTICES)
    .where(
        _v.worker_id == bindparam("b_worker"),
        _v.position.between(bindparam("first"), bindparam("last")),
        _v.held_by.is_(None),
        _v.shared == 0,
        _v.used == 0,
    )
    .values(held_by=bindparam("job_id"))
    .returning(_v.type, _v.unit, _v.size)
)

_ADD_BOOKINGS = insert(INVENTORY_BOOKINGS)


@dataclass(frozen=True)
class BookingPlan:
    """What booking a placement writes, worked out in Python before any statement: the
    exclusive runs of positions per worker, the vertices held shared, the draws (vertex,
    worker, amount, in booking order) and the booking rows."""

    exclusive: dict[int, list[tuple[int, int]]]
    shared: list[int]
    draws: list[tuple[int, int, int]]
    rows: list[dict[str, Any]]
    places: dict[int, tuple[int, int, int]]
    workers: list[int]

    def runs(self) -> list[tuple[int, int, int]]:
        """(worker, first, last) of each exclusive run, in worker and position order."""
        return [
            (worker_id, first, last)
            for worker_id, ranges in sorted(self.exclusive.items())
            for first, last in _runs(ranges)
        ]


def plan_bookings(session: Session, job: Job, placement: Placement) -> BookingPlan:
    """The rows and ranges that booking the placement for the job writes."""
    session.flush()
    bookings = placement.bookings()
    places = _places(session, [b.vertex for b in bookings])
    exclusive: dict[int, list[tuple[int, int]]] = {}
    shared: list[int] = []
    draws: list[tuple[int, int, int]] = []
    rows = []
    for booking in bookings:
        worker_id, first, last = places[booking.vertex.key]
        if booking.mode == "exclusive":
            exclusive.setdefault(worker_id, []).append((first, last))
        elif booking.mode == "shared":
            shared.append(booking.vertex.key)
        else:
            draws.append((booking.vertex.key, worker_id, booking.amount))
        rows.append(
            {
                "job_id": job.id,
                "vertex_id": booking.vertex.key,
                "worker_id": worker_id,
                "mode": booking.mode,
                "amount": booking.amount,
            }
        )
    workers = sorted({places[b.vertex.key][0] for b in bookings})
    return BookingPlan(exclusive, shared, draws, rows, places, workers)


def book_placement(session: Session, job: Job, placement: Placement) -> list[int]:
    """Book what the placement selected for the job; the worker ids touched. Raises
    ConflictError (and the transaction must roll back) when a vertex was taken meanwhile.

    Shared holds are one conditional UPDATE, which must change every vertex; exclusive
    subtrees one conditional UPDATE per run of merged position ranges (per worker), which
    must change every row of the run, or some row was taken. The UPDATEs return the rows
    they changed, and the free counts and untouched counters move by what those rows held
    (no recount). The positions come from the tree the placement was made on.
    (booking_statements.book_and_start does the same in one statement on PostgreSQL.)"""
    plan = plan_bookings(session, job, placement)
    book_plan(session, job, plan)
    return plan.workers


def book_plan(session: Session, job: Job, plan: BookingPlan) -> None:
    """:func:`book_placement` of a plan already worked out."""
    connection = session.connection()
    free: _FreeDelta = {}
    untouched: _UntouchedDelta = {}
    for vertex_id, worker_id, amount in plan.draws:
        drawn = connection.execute(_DRAW, {"vertex_id": vertex_id, "amount": amount}).one_or_none()
        if drawn is None:
            raise _conflict(job)
        key = (worker_id, drawn.type, drawn.unit or "")
        free[key] = free.get(key, 0) - amount
        if drawn.used == amount and drawn.shared == 0:
            untouched[worker_id] = untouched.get(worker_id, 0) - 1
    if plan.shared:
        # bookings() gives each shared vertex once.
        changed = connection.execute(_SHARE, {"vertex_ids": plan.shared}).all()
        if len(changed) != len(plan.shared):
            raise _conflict(job)
        for row in changed:
            if row.shared == 1 and row.used == 0:
                worker_id = plan.places[row.id][0]
                untouched[worker_id] = untouched.get(worker_id, 0) - 1
    for worker_id, first, last in plan.runs():
        held = connection.execute(
            _HOLD, {"b_worker": worker_id, "first": first, "last": last, "job_id": job.id}
        ).all()
        if len(held) != last - first + 1:
            raise _conflict(job)
        # Every row held was entirely free (shared = 0, used = 0, not held).
        for row in held:
            key = (worker_id, row.type, row.unit or "")
            free[key] = free.get(key, 0) - _units(row.unit, row.size)
        untouched[worker_id] = untouched.get(worker_id, 0) - len(held)
    if plan.rows:
        connection.execute(_ADD_BOOKINGS, plan.rows)
    _apply(session, free, untouched)


def conflict(job: Job) -> ConflictError:
    """The error of a booking that found a vertex taken (the transaction rolls back)."""
    return _conflict(job)


_MOVE_FREE = (
    update(INVENTORY_COUNTS)
    .where(
        INVENTORY_COUNTS.c.worker_id == bindparam("w_id"),
        INVENTORY_COUNTS.c.type == bindparam("w_type"),
        INVENTORY_COUNTS.c.unit == bindparam("w_unit"),
    )
    .values(free=INVENTORY_COUNTS.c.free + bindparam("delta"))
)

_MOVE_UNTOUCHED = (
    update(WORKER_INVENTORIES)
    .where(WORKER_INVENTORIES.c.worker_id == bindparam("w_id"))
    .values(untouched=WORKER_INVENTORIES.c.untouched + bindparam("delta"))
)


def _apply(session: Session, free: _FreeDelta, untouched: _UntouchedDelta) -> None:
    """Move the free counts and untouched counters by the deltas (one executemany each,
    in key order so that concurrent transactions lock rows in the same order)."""
    changes = [
        {"w_id": w, "w_type": t, "w_unit": u, "delta": d}
        for (w, t, u), d in sorted(free.items())
        if d
    ]
    connection = session.connection()
    if changes:
        connection.execute(_MOVE_FREE, changes)
    moved = [{"w_id": w, "delta": d} for w, d in sorted(untouched.items()) if d]
    if moved:
        connection.execute(_MOVE_UNTOUCHED, moved)


_ACTIVE_BOOKINGS = (
    select(
        INVENTORY_BOOKINGS.c.id,
        INVENTORY_BOOKINGS.c.vertex_id,
        INVENTORY_BOOKINGS.c.worker_id,
        INVENTORY_BOOKINGS.c.mode,
        INVENTORY_BOOKINGS.c.amount,
    )
    .where(
        INVENTORY_BOOKINGS.c.job_id == bindparam("job_id"),
        INVENTORY_BOOKINGS.c.released_at.is_(None),
    )
    .order_by(INVENTORY_BOOKINGS.c.vertex_id)
    .with_for_update()
)

_UNHOLD = (
    update(INVENTORY_VERTICES)
    .where(
        _v.worker_id.in_(bindparam("worker_ids", expanding=True)),
        _v.held_by == bindparam("job_id"),
    )
    .values(held_by=None)
    .returning(_v.worker_id, _v.type, _v.unit, _v.size)
)

_UNSHARE = (
    update(INVENTORY_VERTICES)
    .where(_v.id == bindparam("vertex_id"))
    .values(shared=_v.shared - 1)
    .returning(_v.type, _v.unit, _v.shared, _v.used, _v.held_by)
)

_UNDRAW = (
    update(INVENTORY_VERTICES)
    .where(_v.id == bindparam("vertex_id"))
    .values(used=_v.used - bindparam("amount"))
    .returning(_v.type, _v.unit, _v.shared, _v.used, _v.held_by)
)

_END_BOOKINGS = (
    update(INVENTORY_BOOKINGS)
    .where(
        INVENTORY_BOOKINGS.c.job_id == bindparam("b_job"),
        INVENTORY_BOOKINGS.c.released_at.is_(None),
    )
    .values(released_at=bindparam("now"))
)


def release(session: Session, job: Job) -> None:
    """Free everything the job holds in inventories: its exclusive holds in one UPDATE,
    shared holds and draws one by one; the counts move by what the UPDATEs returned."""
    session.flush()
    connection = session.connection()
    bookings = connection.execute(_ACTIVE_BOOKINGS, {"job_id": job.id}).all()
    if not bookings:
        return
    free: _FreeDelta = {}
    untouched: _UntouchedDelta = {}
    touched = sorted({b.worker_id for b in bookings})
    if any(b.mode == "exclusive" for b in bookings):
        for row in connection.execute(_UNHOLD, {"worker_ids": touched, "job_id": job.id}):
            # A held row has shared = 0 and used = 0 (held_alone): it is entirely free now.
            key = (row.worker_id, row.type, row.unit or "")
            free[key] = free.get(key, 0) + _units(row.unit, row.size)
            untouched[row.worker_id] = untouched.get(row.worker_id, 0) + 1
    for b in bookings:
        if b.mode == "exclusive":
            continue
        if b.mode == "shared":
            after = connection.execute(_UNSHARE, {"vertex_id": b.vertex_id}).one()
        else:
            after = connection.execute(
                _UNDRAW, {"vertex_id": b.vertex_id, "amount": b.amount}
            ).one()
            key = (b.worker_id, after.type, after.unit or "")
            free[key] = free.get(key, 0) + b.amount
        if after.shared == 0 and after.used == 0 and after.held_by is None:
            untouched[b.worker_id] = untouched.get(b.worker_id, 0) + 1
    connection.execute(_END_BOOKINGS, {"b_job": job.id, "now": utcnow()})
    _apply(session, free, untouched)


def booked_r(session: Session, job_id: int) -> list[dict[str, object]]:
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
