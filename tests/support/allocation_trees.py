"""Helpers for allocation tests: inventory trees built from shape strings, without SQL."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from app.matching.allocation.spec import parse_inventory
from app.matching.allocation.vertices import Vertex, upper_tree

_keys = itertools.count(1)


def node_tree(name: str, rank: int, inventory: str) -> tuple[Vertex, tuple[tuple[str, str], ...]]:
    """A worker's node vertex (fully loaded) and its chain above the node."""
    parsed = parse_inventory(inventory)
    kids: dict[int, list[int]] = {v.position: [] for v in parsed.vertices}
    for v in parsed.vertices:
        if v.parent is not None:
            kids[v.parent].append(v.position)

    def build(position: int) -> Vertex:
        v = parsed.vertices[position]
        return Vertex(
            next(_keys),
            v.type,
            rank if position == 0 else v.index,
            unit=v.unit,
            size=v.size,
            worker=name if position == 0 else None,
            rank=rank if position == 0 else None,
            children=[build(k) for k in kids[position]],
        )

    return build(0), parsed.upper


def cluster(inventories: Sequence[str], names: Sequence[str] | None = None) -> Vertex:
    """One tree of workers ``n0, n1, ...`` (ranks 0, 1, ...) with the given inventories."""
    names = names or [f"n{i}" for i in range(len(inventories))]
    built = [
        node_tree(name, rank, inv)
        for rank, (name, inv) in enumerate(zip(names, inventories, strict=True))
    ]
    return upper_tree([node for node, _ in built], [chain for _, chain in built])
