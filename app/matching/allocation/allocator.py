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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.notations.flux import jobspec as rfc14
from app.notations.flux.ranges import Count, count_values

Policy = Literal["first", "pack"]
POLICIES: tuple[Policy, ...] = ("first", "pack")
#: (type, unit) of a resource: a unit makes it a pool.
Key = tuple[str, str | None]
#: Steps of the search before it gives up on a job (reported as unplaceable).
DEFAULT_BUDGET = 200_000


class Vertex:
    """One vertex of a free-inventory tree, as seen by one allocation.

    ``held`` means another job holds it exclusively, ``shared`` how many other jobs hold it
    shared, ``used`` the amount other jobs drew from a pool. A node may be lazy: its
    children come from ``loader`` on first use, and ``summary`` (free units per key, and
    whether it is entirely free) stands in for them until then. ``place`` is where a
    vertex built from inventory rows lies: (worker id, its position, the last position of
    its subtree), so that booking needs no query to find it.
    """

    __slots__ = (
        "_children",
        "free",
        "held",
        "index",
        "key",
        "loader",
        "parent",
        "place",
        "pristine",
        "rank",
        "shared",
        "size",
        "type",
        "unit",
        "used",
        "worker",
    )

    def __init__(
        self,
        key: int,
        type: str,
        index: int = 0,
        *,
        unit: str | None = None,
        size: int = 1,
        used: int = 0,
        held: bool = False,
        shared: int = 0,
        worker: str | None = None,
        rank: int | None = None,
        children: Sequence[Vertex] = (),
        loader: Callable[[], list[Vertex]] | None = None,
        summary: tuple[dict[Key, int], bool] | None = None,
        place: tuple[int, int, int] | None = None,
    ) -> None:
        self.key = key
        self.type = type
        self.index = index
        self.unit = unit
        self.size = size
        self.used = used
        self.held = held
        self.shared = shared
        self.worker = worker
        self.rank = rank
        self.parent: Vertex | None = None
        self.loader = loader
        self.place = place
        self._children: list[Vertex] = []
        self.free: dict[Key, int] = {}
        self.pristine = True
        if summary is not None:
            self.free, self.pristine = dict(summary[0]), summary[1]
        else:
            self._adopt(list(children))

    @classmethod
    def built(
        cls,
        key: int,
        type: str,
        index: int,
        unit: str | None,
        size: int,
        used: int,
        held: bool,
        shared: int,
        worker: str | None,
        rank: int | None,
        children: list[Vertex],
        place: tuple[int, int, int] | None,
    ) -> Vertex:
        """The vertex ``Vertex(key, type, index, unit=..., ..., children=children,
        place=place)`` makes, in fewer steps: trees built from inventory rows make tens
        of vertices per node the allocator looks into, and the keyword call, _adopt and
        refresh cost more than the walk itself on a one-node job."""
        self = cls.__new__(cls)
        self.key, self.type, self.index, self.unit, self.size = key, type, index, unit, size
        self.used, self.held, self.shared, self.worker, self.rank = used, held, shared, worker, rank
        self.parent = None
        self.loader = None
        self.place = place
        self._children = children
        # As refresh: nothing free when held, else its own unit(s) then its children's.
        free: dict[Key, int] = {}
        pristine = not held and shared == 0 and used == 0
        if not held:
            free[(type, unit)] = (size - used) if unit is not None else 1
        for child in children:
            child.parent = self
            if child.worker is None and worker is not None:
                child.set_worker(worker, rank)
            if not held:
                for k, n in child.free.items():
                    free[k] = free.get(k, 0) + n
            if not child.pristine:
                pristine = False
        self.free = free
        self.pristine = pristine
        return self

    def _adopt(self, children: list[Vertex]) -> None:
        self._children = children
        for child in children:
            child.parent = self
            if child.worker is None and self.worker is not None:
                child.set_worker(self.worker, self.rank)
        self.refresh()

    def set_worker(self, worker: str, rank: int | None) -> None:
        self.worker, self.rank = worker, rank
        for child in self._children:
            child.set_worker(worker, rank)

    def refresh(self) -> None:
        """Recompute ``free`` and ``pristine`` from the children (bottom-up)."""
        free: dict[Key, int] = {}
        if not self.held:
            mine = (self.type, self.unit)
            free[mine] = (self.size - self.used) if self.unit is not None else 1
            for child in self._children:
                for k, n in child.free.items():
                    free[k] = free.get(k, 0) + n
        self.free = free
        self.pristine = (
            not self.held
            and self.shared == 0
            and self.used == 0
            and all(c.pristine for c in self._children)
        )

    @property
    def children(self) -> list[Vertex]:
        if self.loader is not None:
            loader, self.loader = self.loader, None
            self._adopt(loader())
        return self._children

    @property
    def loaded_children(self) -> list[Vertex]:
        """Children without loading a lazy node (empty until loaded)."""
        return self._children

    @property
    def is_leaf(self) -> bool:
        return self.loader is None and not self._children

    def subtree(self) -> Iterator[Vertex]:
        yield self
        for child in self.children:
            yield from child.subtree()

    @property
    def free_total(self) -> int:
        return sum(self.free.values())

    def __repr__(self) -> str:
        return f"Vertex({self.type}{self.index}@{self.worker})"


def upper_tree(nodes: Sequence[Vertex], chains: Sequence[tuple[tuple[str, str], ...]]) -> Vertex:
    """The cluster as one tree: a root, the vertices above the nodes (workers with equal
    chains share them) and the node vertices, children in the given node order."""
    top = _Level(None)
    for node, chain in zip(nodes, chains, strict=True):
        level = top
        for step in chain:
            if step not in level.sub:
                level.sub[step] = _Level(step)
                level.items.append(level.sub[step])
            level = level.sub[step]
        level.items.append(node)
    return Vertex(-1, "", children=_build_level(top, iter(range(-2, -(1 << 62), -1))))


# The recursive helpers of this module are functions of their own, not closures: a closure
# that calls itself is a reference cycle, and each allocation left some (with what they
# held: trees, the search) to the cyclic garbage collector, whose runs cost 0.6 ms per
# allocation at 4,096 nodes.


def _build_level(level: _Level, keys: Iterator[int]) -> list[Vertex]:
    out: list[Vertex] = []
    for item in level.items:
        if isinstance(item, Vertex):
            out.append(item)
            continue
        assert item.step is not None
        key = next(keys)
        type_, name = item.step
        # ASCII digits only: str.isdigit also passes '²', which int() refuses.
        index = int(name) if name.isascii() and name.isdigit() and len(name) <= 18 else -key
        out.append(Vertex(key, type_, index, children=_build_level(item, keys)))
    return out


class _Level:
    def __init__(self, step: tuple[str, str] | None) -> None:
        self.step = step
        self.items: list[Vertex | _Level] = []
        self.sub: dict[tuple[str, str], _Level] = {}


# -- requests -------------------------------------------------------------------------------


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


def min_nodes(requests: Sequence[VertexRequest]) -> int:
    """How many nodes the job needs at least (0 when it names none)."""
    return sum(_min_nodes(request, 1) for request in requests)


def _min_nodes(request: VertexRequest, factor: int) -> int:
    if request.type == "node":
        return factor * request.minimum
    return sum(_min_nodes(c, factor * request.minimum) for c in request.children)


# -- results --------------------------------------------------------------------------------


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


def dismantle(root: Vertex) -> None:
    """Unlink a tree that nothing will walk again: parents and children refer to each
    other (and lazy nodes to their loader, which refers to them), so an abandoned tree is
    a reference cycle that only the cyclic garbage collector frees, tens to hundreds of
    vertices per allocation; its runs cost 0.6 ms per allocation at 4,096 nodes. Unlinked,
    the vertices go as soon as the last reference does. Vertices kept elsewhere (a
    placement's) keep their own fields but no longer know their parent."""
    stack = [root]
    while stack:
        vertex = stack.pop()
        stack.extend(vertex._children)
        vertex._children = []
        vertex.parent = None
        vertex.loader = None


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
