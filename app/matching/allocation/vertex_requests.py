"""The job's side of an allocation: an RFC 14 resources list turned into a tree of
:class:`VertexRequest` with effective exclusivity (RFC 14 defaults: exclusive inside a slot,
shared outside) and the minimum units each vertex needs, and the summaries the coarse
filters use before any tree is walked (total need, per-node need, whole types, node count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.matching.allocation.vertices import Key
from app.notations.flux import jobspec as rfc14
from app.notations.flux.ranges import Count, count_values


@dataclass(frozen=True)
class VertexRequest:
    """One vertex of the job's resources with its effective exclusivity and its needs."""

    type: str
    count: Count
    unit: str | None
    exclusive: bool
    label: str | None
    path: str
    children: tuple[VertexRequest, ...]
    #: Minimum units per instance of each key in this vertex's subtree (itself included).
    need: dict[Key, int] = field(hash=False, compare=False)
    #: Whether this vertex is a node or holds one.
    holds_nodes: bool
    #: Minimum units of each key that all its children need together.
    child_need: dict[Key, int] = field(hash=False, compare=False)

    @property
    def is_pool(self) -> bool:
        return self.unit is not None and self.type != "slot"

    @property
    def minimum(self) -> int:
        return _minimum(self.count)

    def total_need(self) -> dict[Key, int]:
        """Minimum units of each key for all instances of this vertex."""
        if self.is_pool:
            return dict(self.need)
        return {k: n * self.minimum for k, n in self.need.items()}


def _minimum(count: Count) -> int:
    return next(iter(count_values(count)))


def build_requests(resources: rfc14.Resources) -> tuple[VertexRequest, ...]:
    """The request tree of a validated resources list (RFC 14 exclusive defaults)."""

    def build(vertex: rfc14.ResourceVertex, path: str, in_slot: bool) -> VertexRequest:
        slot = vertex.type == "slot"
        default = in_slot or slot
        exclusive = default if vertex.exclusive is None else vertex.exclusive
        children = tuple(
            build(child, f"{path}/{child.type}", in_slot or slot) for child in vertex.with_
        )
        need: dict[Key, int] = {}
        if not slot:
            key = (vertex.type, vertex.unit)
            need[key] = _minimum(vertex.count) if vertex.unit is not None else 1
        for child in children:
            for k, n in child.total_need().items():
                need[k] = need.get(k, 0) + n
        holds = vertex.type == "node" or any(c.holds_nodes for c in children)
        return VertexRequest(
            vertex.type,
            vertex.count,
            vertex.unit if not slot else None,
            exclusive,
            vertex.label,
            path,
            children,
            need,
            holds,
            list_need(children),
        )

    return tuple(build(vertex, vertex.type, False) for vertex in resources)


def list_need(requests: Sequence[VertexRequest]) -> dict[Key, int]:
    need: dict[Key, int] = {}
    for request in requests:
        for k, n in request.total_need().items():
            need[k] = need.get(k, 0) + n
    return need


def node_needs(requests: Sequence[VertexRequest]) -> dict[Key, int]:
    """What one node must have free, at least, to take part in the job: the smallest need
    of any part of the request that lands on one node (a node vertex's subtree, a slot
    that holds no node, or a resource requested outside any node). For coarse filtering."""
    found: list[dict[Key, int]] = []
    for request in requests:
        _node_needs(request, found)
    if not found:
        return {}
    keys = set.intersection(*(set(need) for need in found))
    return {k: min(need[k] for need in found) for k in sorted(keys, key=str)}


def _node_needs(request: VertexRequest, found: list[dict[Key, int]]) -> None:
    if request.type == "node":
        found.append({k: n for k, n in request.need.items() if k[0] != "node"})
    elif not request.holds_nodes:
        per = request.need if request.type == "slot" else {(request.type, request.unit): 1}
        found.append(dict(per))
    else:
        for child in request.children:
            _node_needs(child, found)


def whole_types(requests: Sequence[VertexRequest]) -> frozenset[str]:
    """Types of which one node must have an entirely free vertex (nothing held, shared or
    drawn in its subtree) to take part in the job: the exclusive vertices (not pools) that
    every part of the request landing on one node asks for, as in :func:`node_needs`. A
    node with 31 of 32 cores free passes the counts for ``slot/node`` but not this."""
    found: list[set[str]] = []
    for request in requests:
        _whole_types(request, found)
    if not found:
        return frozenset()
    return frozenset(set.intersection(*found))


def _whole_types(request: VertexRequest, found: list[set[str]]) -> None:
    if request.type == "node" or not request.holds_nodes:
        found.append(_exclusive_types(request))
    else:
        for child in request.children:
            _whole_types(child, found)


def _exclusive_types(request: VertexRequest) -> set[str]:
    if request.minimum < 1:
        return set()
    out = {request.type} if request.exclusive and not request.is_pool else set()
    if request.type == "slot":
        out.discard("slot")
    for child in request.children:
        out |= _exclusive_types(child)
    return out


def cores_alone(requests: Sequence[VertexRequest]) -> int | None:
    """The cores the whole request needs when it asks for nothing but cores on at most
    one node, else None: what decides whether a worker without an inventory, which offers
    ``node/[core=<slots>]`` and nothing else, could ever hold it (issue 35)."""
    if min_nodes(requests) > 1:
        return None
    need = list_need(requests)
    if any(key not in (("core", None), ("node", None)) for key in need):
        return None
    return need.get(("core", None), 0)


def min_nodes(requests: Sequence[VertexRequest]) -> int:
    """How many nodes the job needs at least (0 when it names none)."""
    return sum(_min_nodes(request, 1) for request in requests)


def _min_nodes(request: VertexRequest, factor: int) -> int:
    if request.type == "node":
        return factor * request.minimum
    return sum(_min_nodes(c, factor * request.minimum) for c in request.children)
