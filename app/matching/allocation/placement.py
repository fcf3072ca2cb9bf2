"""What an allocation returns: the selections (request instance -> vertex), the bookings
they imply (exclusive subtree, shared vertex or amount drawn from a pool), the shortfalls
that kept a search from succeeding, and the marking of bookings on a loaded tree.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from app.matching.allocation.vertex_requests import VertexRequest
from app.matching.allocation.vertices import Vertex


@dataclass(frozen=True)
class Selection:
    """A request instance and the vertex it took (None for a slot instance); ``amount`` is
    what a pool request drew from this pool (1 otherwise)."""

    request: VertexRequest
    vertex: Vertex | None
    amount: int
    children: tuple[Selection, ...]

    def walk(self) -> Iterator[Selection]:
        yield self
        for child in self.children:
            yield from child.walk()


BookingMode = Literal["exclusive", "shared", "draw"]


@dataclass(frozen=True)
class VertexBooking:
    """What to book: a vertex's whole subtree exclusively, a vertex shared, or an amount
    drawn from a pool."""

    vertex: Vertex
    mode: BookingMode
    amount: int = 1


@dataclass(frozen=True)
class Placement:
    selections: tuple[Selection, ...]

    def walk(self) -> Iterator[Selection]:
        for selection in self.selections:
            yield from selection.walk()

    def bookings(self) -> list[VertexBooking]:
        """The bookings, outermost first; nothing inside an exclusive booking is repeated."""
        out: list[VertexBooking] = []
        covered: set[int] = set()
        exclusive_roots: set[int] = set()
        for selection in self.walk():
            vertex = selection.vertex
            if vertex is None or vertex.worker is None:
                # Slot instances are no vertices; vertices above the node are never booked.
                continue
            if _inside(vertex, exclusive_roots):
                continue
            if selection.request.is_pool:
                out.append(VertexBooking(vertex, "draw", selection.amount))
            elif selection.request.exclusive:
                out.append(VertexBooking(vertex, "exclusive"))
                exclusive_roots.add(vertex.key)
            elif vertex.key not in covered:
                out.append(VertexBooking(vertex, "shared"))
            covered.add(vertex.key)
        return out

    def nodes(self) -> list[Vertex]:
        """The nodes the job got, in selection order, each once."""
        seen: dict[int, Vertex] = {}
        for selection in self.walk():
            vertex = selection.vertex
            while vertex is not None and vertex.type != "node":
                vertex = vertex.parent
            if vertex is not None and vertex.worker is not None:
                seen.setdefault(vertex.key, vertex)
        return list(seen.values())


def _inside(vertex: Vertex, roots: set[int]) -> bool:
    node: Vertex | None = vertex.parent
    while node is not None:
        if node.key in roots:
            return True
        node = node.parent
    return False


@dataclass(frozen=True)
class Shortfall:
    """A level of the request where too few free vertices were found: ``needed`` at least,
    ``found`` at best, in ``contexts`` places, on the workers named."""

    path: str
    needed: int
    found: int
    contexts: int
    workers: frozenset[str]


@dataclass(frozen=True)
class Outcome:
    placement: Placement | None
    shortfalls: tuple[Shortfall, ...]
    exhausted: bool = False


def apply_bookings(bookings: Sequence[VertexBooking]) -> None:
    """Mark bookings on a loaded tree (what another job's allocation makes unavailable);
    used by tests and by callers that allocate several jobs on one tree."""
    touched: list[Vertex] = []
    for booking in bookings:
        vertex = booking.vertex
        if booking.mode == "exclusive":
            for inner in vertex.subtree():
                inner.held = True
                touched.append(inner)
        elif booking.mode == "shared":
            vertex.shared += 1
        else:
            vertex.used += booking.amount
        touched.append(vertex)
    for vertex in sorted(set(touched), key=_depth, reverse=True):
        node: Vertex | None = vertex
        while node is not None:
            node.refresh()
            node = node.parent


def _depth(vertex: Vertex) -> int:
    depth, node = 0, vertex.parent
    while node is not None:
        depth, node = depth + 1, node.parent
    return depth
