"""Allocating an RFC 14 resources request on free inventory trees: a depth-first walk with
pruning and a selection policy, as Fluxion matches (docs/notations/flux.md).

Pure functions over plain data (:class:`Vertex` trees): app/matching/allocation/inventory.py builds
the trees from rows, filters workers in SQL first and books what this module selects; the
tests hold this module to an exhaustive brute-force reference.

Semantics (RFC 14, with the decisions jobmatch takes where it is silent):

- A request vertex of type T under a context vertex C matches the first vertices of type T
  on each path down from C (levels may be skipped: ``node/core`` matches cores under
  sockets, Fluxion's "pristine" mode). A count N takes N of them; a range or idset count
  takes the largest acceptable value not above the number that qualify (Fluxion's
  ``calc_count``), trying smaller acceptable values when interactions make it fail.
- ``exclusive`` (RFC 14 defaults: true inside a slot, false outside) books the vertex and
  its whole subtree: it must be entirely free. A non-exclusive vertex is shared: others may
  use what the job does not take below it, and it must only not be held exclusively.
- A slot is a bundle, not a vertex: each instance's resources sit within one parent.
  Within a node the parent is the context; above the node (the cluster or a switch), a slot
  that holds no node sits within one node, and a slot that holds nodes within the context.
- A vertex with a ``unit`` draws an amount from pools of that type and unit (memory): the
  amount may come from several pools under the context; pools are drawn greedily in order.
- Exclusivity above the node level (``cluster{x}``) is not supported: those vertices are
  always shared.
- Policies: ``first`` takes vertices in id order and nodes by rank (lowest first);
  ``pack`` visits partly used vertices before empty ones (most used first), so that empty
  nodes stay empty for jobs that need whole nodes.

The search is complete (it backtracks over alternative choices) but bounded by
``budget`` steps; interchangeable leaves (same parent, same state) are tried once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.matching.allocation.placement import Outcome, Placement, Selection, Shortfall
from app.matching.allocation.vertex_requests import VertexRequest, list_need
from app.matching.allocation.vertices import Key, Vertex
from app.notations.flux.ranges import Count

Policy = Literal["first", "pack"]
POLICIES: tuple[Policy, ...] = ("first", "pack")
#: Steps of the search before it gives up on a job (reported as unplaceable).
DEFAULT_BUDGET = 200_000


# -- the search -----------------------------------------------------------------------------


@dataclass
class _Short:
    needed: int
    found: int = 0
    contexts: int = 0
    workers: set[str] = field(default_factory=set)


class _Budget(Exception):
    """The search took more steps than its budget allowed; the job is reported unplaced."""


class _Search:
    def __init__(self, policy: Policy, budget: int) -> None:
        self.policy = policy
        self.budget = budget
        self.steps = 0
        self.selected: set[int] = set()
        self.exclusive: set[int] = set()
        self.inner: dict[int, int] = {}
        self.drawn: dict[int, int] = {}
        self.short: dict[str, _Short] = {}

    # state ---------------------------------------------------------------------------

    def _mark(self, vertex: Vertex, delta: int) -> None:
        node: Vertex | None = vertex
        while node is not None:
            self.inner[node.key] = self.inner.get(node.key, 0) + delta
            node = node.parent

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise _Budget

    def _shortfall(
        self,
        request: VertexRequest,
        context: Vertex,
        needed: int,
        found: int,
        path: str | None = None,
    ) -> None:
        entry = self.short.setdefault(path or request.path, _Short(needed))
        entry.found = max(entry.found, found)
        entry.contexts += 1
        if context.worker is not None:
            entry.workers.add(context.worker)

    # candidates ----------------------------------------------------------------------

    def _descend(self, context: Vertex, key: Key) -> list[Vertex]:
        found: list[Vertex] = []
        self._visit(context, key, found)
        return found

    def _visit(self, vertex: Vertex, key: Key, found: list[Vertex]) -> None:
        for child in vertex.children:
            if child.key in self.exclusive or child.held or child.free.get(key, 0) <= 0:
                continue
            if child.key in self.selected:
                # Taken shared by another part of the job: pass through, never take.
                self._visit(child, key, found)
            elif (child.type, child.unit) == key:
                found.append(child)
            else:
                self._visit(child, key, found)

    def _order(self, candidates: list[Vertex]) -> list[Vertex]:
        if self.policy == "first":
            return candidates

        # pack: most used first (partly used before entirely free), then id order.
        def weight(v: Vertex) -> tuple[bool, int]:
            probe = v if not v.is_leaf or v.parent is None else v.parent
            return probe.pristine, probe.free_total

        return sorted(candidates, key=weight)

    def _available(self, request: VertexRequest, vertex: Vertex, *, report: bool = False) -> bool:
        if request.exclusive and (not vertex.pristine or self.inner.get(vertex.key, 0)):
            if report:
                self._shortfall(request, vertex, 1, 0, f"{request.path} (entirely free)")
            return False
        for k, n in request.child_need.items():
            if vertex.free.get(k, 0) < n:
                if report:
                    self._shortfall(
                        request, vertex, n, vertex.free.get(k, 0), _key_path(request, k)
                    )
                return False
        return True

    # matching ------------------------------------------------------------------------

    def match_list(
        self, requests: Sequence[VertexRequest], context: Vertex
    ) -> Iterator[list[Selection]]:
        if not requests:
            yield []
            return
        need = list_need(requests)
        if not all(context.free.get(k, 0) >= n for k, n in need.items()):
            for k, n in need.items():
                if context.free.get(k, 0) < n:
                    owner = next(r for r in requests if k in r.total_need())
                    found = context.free.get(k, 0)
                    self._shortfall(owner, context, n, found, _key_path(owner, k))
                    break
            return
        first, rest = requests[0], requests[1:]
        for chosen in self.match(first, context):
            for more in self.match_list(rest, context):
                yield chosen + more

    def match(self, request: VertexRequest, context: Vertex) -> Iterator[list[Selection]]:
        self._tick()
        if request.type == "slot":
            yield from self._slots(request, context)
        elif request.is_pool:
            yield from self._pool(request, context)
        else:
            yield from self._vertices(request, context)

    def _counts(self, count: Count, available: int) -> list[int]:
        """Acceptable counts not above ``available``, largest first."""
        if isinstance(count, int):
            return [count] if count <= available else []
        out: list[int] = []
        limit = available
        while limit >= 1:
            value = count.largest(limit)
            if value is None:
                break
            out.append(value)
            limit = value - 1
        return out

    def _vertices(self, request: VertexRequest, context: Vertex) -> Iterator[list[Selection]]:
        candidates = [
            v
            for v in self._order(self._descend(context, (request.type, None)))
            if self._available(request, v, report=True)
        ]
        counts = self._counts(request.count, len(candidates))
        if not counts:
            self._shortfall(request, context, request.minimum, len(candidates))
            return
        for n in counts:
            yield from self._choose(request, candidates, n, 0)

    def _choose(
        self, request: VertexRequest, candidates: list[Vertex], n: int, start: int
    ) -> Iterator[list[Selection]]:
        if n == 0:
            yield []
            return
        i = start
        while i <= len(candidates) - n:
            vertex = candidates[i]
            if vertex.key not in self.selected and self._available(request, vertex):
                for taken in self._selections_under(request, vertex):
                    for rest in self._choose(request, candidates, n - 1, i + 1):
                        yield [taken, *rest]
            j = i + 1
            if not request.children:
                while j < len(candidates) and self._equivalent(vertex, candidates[j]):
                    j += 1
            i = j

    def _equivalent(self, a: Vertex, b: Vertex) -> bool:
        return (
            a.parent is b.parent
            and a.is_leaf
            and b.is_leaf
            and a.free == b.free
            and a.shared == b.shared
            and self.inner.get(a.key, 0) == self.inner.get(b.key, 0)
        )

    def _selections_under(self, request: VertexRequest, vertex: Vertex) -> Iterator[Selection]:
        self._tick()
        self.selected.add(vertex.key)
        if request.exclusive:
            self.exclusive.add(vertex.key)
        self._mark(vertex, 1)
        try:
            for inside in self.match_list(request.children, vertex):
                yield Selection(request, vertex, 1, tuple(inside))
        finally:
            self._mark(vertex, -1)
            self.selected.discard(vertex.key)
            self.exclusive.discard(vertex.key)

    def _pool(self, request: VertexRequest, context: Vertex) -> Iterator[list[Selection]]:
        pools = self._descend(context, (request.type, request.unit))
        free = [(p, p.size - p.used - self.drawn.get(p.key, 0)) for p in pools]
        total = sum(amount for _, amount in free)
        counts = self._counts(request.count, total)
        if not counts:
            self._shortfall(request, context, request.minimum, total)
            return
        # The largest acceptable amount first (RFC 14); when that leaves too little for the
        # rest of the job, the smallest one. Pools are fungible, so no other split is tried.
        for amount in dict.fromkeys((counts[0], counts[-1])):
            yield from self._draw(request, free, amount)

    def _draw(
        self, request: VertexRequest, free: list[tuple[Vertex, int]], amount: int
    ) -> Iterator[list[Selection]]:
        draws: list[tuple[Vertex, int]] = []
        for pool, available in free:
            if amount == 0:
                break
            take = min(available, amount)
            if take > 0:
                draws.append((pool, take))
                amount -= take
        for pool, take in draws:
            self.drawn[pool.key] = self.drawn.get(pool.key, 0) + take
            self._mark(pool, 1)
        try:
            yield [Selection(request, pool, take, ()) for pool, take in draws]
        finally:
            for pool, take in draws:
                self.drawn[pool.key] -= take
                self._mark(pool, -1)

    def _slots(self, request: VertexRequest, context: Vertex) -> Iterator[list[Selection]]:
        if context.worker is None and not request.holds_nodes:
            anchors = [
                node
                for node in self._order(self._descend(context, ("node", None)))
                if all(node.free.get(k, 0) >= n for k, n in request.need.items())
            ]
        else:
            anchors = [context]
        capacity = [_instances(anchor, request.need) for anchor in anchors]
        suffix = [0] * (len(anchors) + 1)
        for i in range(len(anchors) - 1, -1, -1):
            suffix[i] = suffix[i + 1] + capacity[i]
        counts = self._counts(request.count, suffix[0])
        if not counts:
            self._shortfall(request, context, request.minimum, suffix[0])
            return
        for n in counts:
            yield from self._instances(request, anchors, suffix, n, 0)

    def _instances(
        self, request: VertexRequest, anchors: list[Vertex], suffix: list[int], n: int, start: int
    ) -> Iterator[list[Selection]]:
        if n == 0:
            yield []
            return
        for i in range(start, len(anchors)):
            if suffix[i] < n:
                return
            for inside in self.match_list(request.children, anchors[i]):
                instance = Selection(request, None, 1, tuple(inside))
                for rest in self._instances(request, anchors, suffix, n - 1, i):
                    yield [instance, *rest]


def _key_path(request: VertexRequest, key: Key) -> str:
    """The request path down to the resource type that was short."""
    if (request.type, request.unit) == key:
        return request.path
    for child in request.children:
        if key in child.total_need():
            return _key_path(child, key)
    return f"{request.path}/{key[0]}"


def _instances(anchor: Vertex, need: dict[Key, int]) -> int:
    """How many instances of a bundle the anchor's free units could hold at most."""
    if not need:
        return 1 << 62
    return min(anchor.free.get(k, 0) // n for k, n in need.items())


def place_requests(
    root: Vertex,
    requests: Sequence[VertexRequest],
    policy: Policy = "first",
    *,
    budget: int = DEFAULT_BUDGET,
) -> Outcome:
    """The first allocation of ``requests`` under ``root`` in the policy's order, or the
    shortfalls that kept every attempt from succeeding."""
    search = _Search(policy, budget)
    exhausted = False
    placement = None
    try:
        for selections in search.match_list(requests, root):
            placement = Placement(tuple(selections))
            break
    except _Budget:
        exhausted = True
    shortfalls = tuple(
        Shortfall(path, e.needed, e.found, e.contexts, frozenset(e.workers))
        for path, e in sorted(search.short.items())
    )
    return Outcome(placement, () if placement else shortfalls, exhausted)
