"""R, the description of the resources a job holds (after RFC 20, the Resource Set
Specification, in its ``R_lite`` form): per node its rank, its name, the ids of each leaf
type as an RFC 22 idset, and the amounts drawn from pools.

One builder serves both sources of bookings: the allocator's in-memory placement
(:func:`placement_r`) and the booking rows of a running job (``r.booked_r``). Pure: it
imports no SQLAlchemy, so the allocator's side stays pure too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.matching.allocation.placement import Placement
from app.notations.flux.idset import encode_idset


@dataclass
class _Node:
    rank: int | None
    ids: dict[str, set[int]] = field(default_factory=dict)
    pools: dict[str, dict[str, int]] = field(default_factory=dict)


class ResourceSet:
    """What one job holds, gathered node by node, then rendered as R.

    Nodes are listed by rank, then by name; a node without a rank sorts as rank 0. This is
    the order ``GET /v1/jobs/{id}/allocation`` has always answered in (its tests pin it),
    and the order of "nodes by rank" that docs/notations/flux.md gives for placements.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}

    def _node(self, name: str, rank: int | None) -> _Node:
        return self._nodes.setdefault(name, _Node(rank))

    def draw(self, node: str, rank: int | None, type: str, unit: str, amount: int) -> None:
        """An amount drawn from a pool of that type and unit."""
        pools = self._node(node, rank).pools.setdefault(type, {})
        pools[unit] = pools.get(unit, 0) + amount

    def hold(
        self,
        node: str,
        rank: int | None,
        *,
        type: str,
        unit: str | None,
        size: int,
        logical_id: int,
        leaf: bool,
    ) -> None:
        """A vertex the job holds (booked itself, or inside a subtree booked exclusively):
        a pool counts with its whole size, a leaf other than the node with its id."""
        entry = self._node(node, rank)
        if unit is not None:
            pools = entry.pools.setdefault(type, {})
            pools[unit] = pools.get(unit, 0) + size
        elif leaf and type != "node":
            entry.ids.setdefault(type, set()).add(logical_id)

    def render(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for name, node in sorted(self._nodes.items(), key=lambda e: (e[1].rank or 0, e[0])):
            item: dict[str, object] = {
                "rank": node.rank,
                "node": name,
                "children": {t: encode_idset(sorted(ids)) for t, ids in sorted(node.ids.items())},
            }
            if node.pools:
                item["pools"] = {t: dict(sorted(u.items())) for t, u in sorted(node.pools.items())}
            out.append(item)
        return out


def placement_r(placement: Placement) -> list[dict[str, object]]:
    """R of what a placement would book, per node of the tree it was placed in."""
    resources = ResourceSet()
    for booking in placement.bookings():
        node = booking.vertex
        while node.type != "node":
            if node.parent is None:
                raise ValueError(f"vertex {booking.vertex.key} lies under no node")
            node = node.parent
        if node.worker is None:
            raise ValueError(f"node vertex {node.key} belongs to no worker")
        vertex = booking.vertex
        if booking.mode == "draw":
            resources.draw(node.worker, node.rank, vertex.type, vertex.unit or "", booking.amount)
            continue
        for held in vertex.subtree() if booking.mode == "exclusive" else [vertex]:
            resources.hold(
                node.worker,
                node.rank,
                type=held.type,
                unit=held.unit,
                size=held.size,
                logical_id=held.index,
                leaf=held.is_leaf,
            )
    return resources.render()
