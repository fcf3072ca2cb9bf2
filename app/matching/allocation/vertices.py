"""The free-inventory tree the allocator walks: :class:`Vertex` (one resource with what
other jobs hold of it), the upper levels above the nodes (cluster, switches) and the
unlinking of a tree nothing will walk again.

Plain data, no SQL: app/matching/allocation/trees.py builds these trees from inventory rows,
app/matching/allocation/allocator.py searches them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

#: (type, unit) of a resource: a unit makes it a pool.
Key = tuple[str, str | None]


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
