"""A worker's inventory: the resource graph it declares, in the RFC 46 shape notation
(``node/[socket=2/[core=16;gpu=2];memory=256{unit:GB}]``) or as an RFC 14 resources list,
expanded into concrete vertices.

Rules (ours; RFC 14 describes requests, not inventories):

- counts are plain integers: ``core=16`` is sixteen core vertices. A vertex with a
  ``unit`` is one *pool* of ``count`` units (``memory=256{unit:GB}`` is one memory vertex
  of size 256 GB), from which requests with the same type and unit draw amounts;
- the worker is one node. A list that is not a single ``node`` is either a chain of single
  vertices above the node (``cluster{id:c0}/switch{id:s1}/node/...``: the worker's place in
  the cluster, named by ``id``; workers with equal chains share those vertices) or, when it
  holds no ``node`` at all, the inside of an implicit node;
- logical ids are numbered per type in depth-first order within the worker (cores of
  socket 0 are 0-15, of socket 1 16-31), as Flux numbers a node's cores and GPUs.

Pure Python: the result is plain data that app/matching/allocation/inventory.py stores as rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from app.notations.errors import NotationError
from app.notations.flux import jobspec as rfc14
from app.notations.flux.shape import parse_shape_resources

#: Most concrete vertices one worker may declare.
MAX_INVENTORY_VERTICES = 100_000


class InventoryError(NotationError):
    """A worker's inventory is not a resource graph jobmatch can allocate from: a count
    that is not an integer, several nodes, a slot, or too many vertices."""

    notation = "inventory"


@dataclass(frozen=True)
class DeclaredVertex:
    """One concrete vertex, in depth-first order; ``parent`` is a position or None."""

    position: int
    parent: int | None
    depth: int
    type: str
    index: int
    unit: str | None
    size: int


@dataclass(frozen=True)
class Inventory:
    """A worker's expanded inventory: its place above the node, and the node's vertices
    (position 0 is the node)."""

    upper: tuple[tuple[str, str], ...]
    vertices: tuple[DeclaredVertex, ...]

    def upper_json(self) -> str:
        return json.dumps([list(pair) for pair in self.upper], separators=(",", ":"))


def parse_inventory(value: str | list[object]) -> Inventory:
    """Parse a shape string or an RFC 14 resources list into an expanded inventory."""
    if isinstance(value, str):
        resources = parse_shape_resources(value)
    else:
        resources = rfc14.validate_resources(value)
    return expand_inventory(resources)


def _integer_count(vertex: rfc14.ResourceVertex, path: str) -> int:
    if not isinstance(vertex.count, int):
        raise InventoryError(
            f"{path}: count {vertex.count} of {vertex.type!r} is not an integer",
            expected="an integer count (an inventory says what exists, not what is acceptable)",
        )
    return vertex.count


def expand_inventory(resources: rfc14.Resources) -> Inventory:
    """Expand a validated resources list into concrete vertices (see the module rules)."""
    upper: list[tuple[str, str]] = []
    level = resources
    path = "resources"
    while len(level) == 1 and level[0].type != "node" and _has_node(level[0].with_):
        above = level[0]
        if _integer_count(above, path) != 1:
            raise InventoryError(
                f"{path}: {above.type!r} above the node has count {above.count}",
                expected="one vertex per level above the node (the worker is one node)",
            )
        upper.append((above.type, above.id if above.id is not None else "0"))
        level = above.with_
        path += "[0].with"
    if any(_has_node(v.with_) for v in level) or sum(v.type == "node" for v in level) > 1:
        raise InventoryError(
            f"{path}: declares several nodes or a node below another vertex",
            expected="one node per worker, with only single vertices above it",
        )
    if len(level) == 1 and level[0].type == "node":
        if _integer_count(level[0], path) != 1:
            raise InventoryError(
                f"{path}: node count {level[0].count}", expected="one node per worker"
            )
        inside = level[0].with_
        path += "[0].with"
    else:
        inside = level
    out: list[DeclaredVertex] = [DeclaredVertex(0, None, 0, "node", 0, None, 1)]
    counters: dict[str, int] = {}

    def visit(vertices: rfc14.Resources, parent: int, depth: int, where: str) -> None:
        for number, vertex in enumerate(vertices):
            here = f"{where}[{number}]"
            if vertex.type in ("slot", "node"):
                raise InventoryError(
                    f"{here}: a {vertex.type!r} inside a node",
                    expected="concrete resources (socket, core, gpu, memory, ...)",
                )
            count = _integer_count(vertex, here)
            copies, size = (1, count) if vertex.unit is not None else (count, 1)
            if vertex.unit is not None and vertex.with_:
                raise InventoryError(
                    f"{here}: pool {vertex.type!r} (unit {vertex.unit}) has children",
                    expected="a pool (a vertex with a unit) to be a leaf",
                )
            for _ in range(copies):
                if len(out) >= MAX_INVENTORY_VERTICES:
                    raise InventoryError(
                        f"more than {MAX_INVENTORY_VERTICES} vertices",
                        expected=f"at most {MAX_INVENTORY_VERTICES} vertices per worker",
                    )
                index = counters.get(vertex.type, 0)
                counters[vertex.type] = index + 1
                position = len(out)
                out.append(
                    DeclaredVertex(position, parent, depth, vertex.type, index, vertex.unit, size)
                )
                visit(vertex.with_, position, depth + 1, f"{here}.with")

    visit(inside, 0, 1, path)
    return Inventory(tuple(upper), tuple(out))


def _has_node(vertices: rfc14.Resources) -> bool:
    return any(v.type == "node" or _has_node(v.with_) for v in vertices)
