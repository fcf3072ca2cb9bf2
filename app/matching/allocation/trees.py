"""Inventory trees for the allocator (app/matching/allocation/allocator.py), built from the
vertex rows of the workers that pass the coarse filter: node rows first, each node's
subtree loaded only when the allocator looks inside it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    FromClause,
    Select,
    and_,
    bindparam,
    func,
    select,
)
from sqlalchemy.orm import Session

from app.db.models import (
    InventoryVertex,
    Worker,
    WorkerInventory,
)
from app.db.tables import (
    INVENTORY_COUNTS,
    INVENTORY_VERTICES,
)
from app.matching.allocation.vertices import Key, Vertex, upper_tree

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
