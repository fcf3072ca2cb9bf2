"""The pure allocator (app/matching/allocation/allocator.py): every RFC 14 / RFC 46 use
case of RFC 46 on a small inventory, and random jobspecs against an exhaustive brute-force
reference."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest

from app.matching.allocation.allocator import place_requests
from app.matching.allocation.placement import Placement, Selection, VertexBooking, apply_bookings
from app.matching.allocation.resource_set import placement_r
from app.matching.allocation.spec import InventoryError, parse_inventory
from app.matching.allocation.vertex_requests import (
    build_requests,
    min_nodes,
    node_needs,
    whole_types,
)
from app.matching.allocation.vertices import Vertex
from app.notations.flux.ranges import count_values
from app.notations.flux.shape import parse_shape_resources
from tests.support.allocation_trees import cluster

NODE = "node/[socket=2/core=8;memory=64{unit:GB};ib10g]"
#: Eight nodes on two switches of one cluster (RFC 46 use cases 1.1-2.9).
MAIN = [f"cluster{{id:c0}}/switch{{id:s{i // 4}}}/{NODE}" for i in range(8)]


def _place(inventories: list[str], shape: str, policy: str = "first") -> Placement | None:
    root = cluster(inventories)
    outcome = place_requests(root, build_requests(parse_shape_resources(shape)), policy)  # type: ignore[arg-type]
    return outcome.placement


def _nodes(placement: Placement | None) -> list[tuple[str | None, dict[str, object]]]:
    assert placement is not None
    return [(item["node"], item["children"]) for item in placement_r(placement)]  # type: ignore[misc]


WHOLE = {"core": "0-15", "ib10g": "0"}


def test_use_case_1_1_four_nodes() -> None:
    """RFC 46 use case 1.1: slot=4/node takes four whole nodes, lowest ranks first."""
    assert _nodes(_place(MAIN, "slot=4/node")) == [(f"n{i}", WHOLE) for i in range(4)]


def test_use_case_1_2_range_takes_the_largest_available() -> None:
    """RFC 46 use case 1.2: slot=3-30/node takes all eight nodes (largest <= 8)."""
    assert len(_nodes(_place(MAIN, "slot=3-30/node"))) == 8
    assert _place(MAIN[:2], "slot=3-30/node") is None


def test_use_case_1_3_shared_nodes_exclusive_sockets() -> None:
    """RFC 46 use case 1.3: node{-x} is shared, the sockets (in a slot) are exclusive."""
    placement = _place(MAIN, "slot=4{nodelevel}/node{-x}/socket=2+/core=4+")
    assert _nodes(placement) == [(f"n{i}", {"core": "0-15"}) for i in range(4)]
    assert placement is not None
    modes = {(b.vertex.type, b.mode) for b in placement.bookings()}
    assert modes == {("node", "shared"), ("socket", "exclusive")}


def test_use_case_1_4() -> None:
    """RFC 46 use case 1.4: slot=4/node/socket=2/core=4 - four exclusive nodes."""
    assert _nodes(_place(MAIN, "slot=4{nodelevel}/node/socket=2/core=4")) == [
        (f"n{i}", WHOLE) for i in range(4)
    ]


def test_use_case_1_5_cluster_and_switch() -> None:
    """RFC 46 use case 1.5: two ib nodes in the cluster and two nodes of one switch."""
    inventories = [*MAIN[:2], *(inv.replace(";ib10g", "") for inv in MAIN[2:])]
    placement = _place(
        inventories,
        "[cluster/slot=2{ib}/node/[memory=4{unit:GB};ib10g];switch/slot=2{bicore}/node/core=2]",
    )
    assert [name for name, _ in _nodes(placement)] == ["n0", "n1", "n2", "n3"]
    assert placement is not None
    by_label = {
        s.request.label: [c.vertex.worker for c in s.children if c.vertex is not None]
        for s in placement.walk()
        if s.request.type == "slot"
    }
    assert sorted(by_label) == ["bicore", "ib"]


def test_use_case_1_6_two_clusters() -> None:
    """RFC 46 use case 1.6: in each of 2 clusters, as many shared nodes with 30 cores."""
    inventories = [f"cluster{{id:c{i // 2}}}/node/core=32" for i in range(4)]
    placement = _place(inventories, "cluster=2/slot/node=1+{-x}/core=30")
    assert _nodes(placement) == [(f"n{i}", {"core": "0-29"}) for i in range(4)]
    # With one cluster only, the cluster level is short, and says so.
    outcome = place_requests(
        cluster(inventories[:2]),
        build_requests(parse_shape_resources("cluster=2/slot/node=1+{-x}/core=30")),
    )
    assert outcome.placement is None
    assert [(s.path, s.needed, s.found) for s in outcome.shortfalls] == [("cluster", 2, 1)]


def test_use_case_1_7_three_switches() -> None:
    """RFC 46 use case 1.7: three switches, as many nodes with a core in each."""
    inventories = [f"switch{{id:s{i // 2}}}/node/core=2" for i in range(6)]
    placement = _place(inventories, "switch=3/slot/node=1+{-x}/core")
    assert _nodes(placement) == [(f"n{i}", {"core": "0"}) for i in range(6)]


def test_use_case_1_8_idset_count() -> None:
    """RFC 46 use case 1.8: slot=4,9,16,25/node takes 4 of 8 nodes."""
    assert len(_nodes(_place(MAIN, "slot=4,9,16,25/node"))) == 4
    assert _place(MAIN[:3], "slot=4,9,16,25/node") is None


def test_use_case_2_3_slots_within_one_node() -> None:
    """RFC 46 use case 2.3: slot=10/core=2; each slot's two cores on one node."""
    placement = _place(MAIN, "slot=10/core=2")
    assert _nodes(placement) == [("n0", {"core": "0-15"}), ("n1", {"core": "0-3"})]
    assert placement is not None
    for slot in placement.selections:
        assert len({c.vertex.worker for c in slot.children if c.vertex}) == 1


def test_use_case_2_4_two_kinds_of_slot_on_one_node() -> None:
    """RFC 46 use case 2.4: 10 read-db slots and one db slot on one node."""
    placement = _place(
        MAIN,
        "node/[slot=10{read-db}/[core;memory=4{unit:GB}];slot{db}/[core=6;memory=24{unit:GB}]]",
    )
    assert placement is not None
    (item,) = placement_r(placement)
    assert item["node"] == "n0" and item["children"] == {"core": "0-15"}
    assert item["pools"] == {"memory": {"GB": 64}}


def test_use_case_2_5_memory_ranges() -> None:
    """RFC 46 use case 2.5: ten slots of one core and at least 2 GB each."""
    placement = _place(MAIN, "slot=10/[memory=2+{unit:GB};core]")
    assert placement is not None and len(placement.selections) == 10
    for slot in placement.selections:
        memory = sum(c.amount for c in slot.children if c.request.type == "memory")
        assert memory >= 2
        assert sum(c.request.type == "core" for c in slot.children) == 1


def test_use_case_2_6_and_2_7() -> None:
    """RFC 46 use cases 2.6 (two nodes with 4+ GB) and 2.7-2.9 (slot/node)."""
    placement = _place(MAIN, "slot=2{4GB-node}/node/memory=4+{unit:GB}")
    assert [item["pools"] for item in placement_r(placement)] == [{"memory": {"GB": 64}}] * 2  # type: ignore[arg-type]
    assert _nodes(_place(MAIN, "slot/node")) == [("n0", WHOLE)]


def test_pack_fills_partly_used_nodes_first() -> None:
    """``pack`` puts a small job on a partly used node; ``first`` on the lowest rank."""
    root = cluster(["node/core=4"] * 3)
    one_core = build_requests(parse_shape_resources("slot/core"))
    # Book one core of n2 by hand (another job).
    n2 = root.children[2]
    apply_bookings([VertexBooking(n2.children[0], "exclusive")])
    first = place_requests(root, one_core, "first").placement
    pack = place_requests(root, one_core, "pack").placement
    assert first is not None and [v.worker for v in first.nodes()] == ["n0"]
    assert pack is not None and [v.worker for v in pack.nodes()] == ["n2"]
    assert placement_r(pack) == [{"rank": 2, "node": "n2", "children": {"core": "1"}}]


def test_node_needs_and_min_nodes() -> None:
    requests = build_requests(parse_shape_resources("slot=4/node/[core=2;gpu]"))
    assert node_needs(requests) == {("core", None): 2, ("gpu", None): 1}
    assert min_nodes(requests) == 4
    assert min_nodes(build_requests(parse_shape_resources("slot=10/core=2"))) == 0


def test_whole_types() -> None:
    """The types of which every node the job lands on needs an entirely free vertex: what
    its exclusive requests take (RFC 14 defaults: exclusive inside a slot)."""

    def whole(shape: str) -> frozenset[str]:
        return whole_types(build_requests(parse_shape_resources(shape)))

    assert whole("slot/node") == {"node"}
    assert whole("slot=4/node") == {"node"}
    assert whole("slot/socket") == {"socket"}
    assert whole("slot/[core=16;gpu=2]") == {"core", "gpu"}
    assert whole("node=2/slot/[core=4;gpu=1]") == {"core", "gpu"}
    # Shared vertices (outside a slot, or {-x}) and pools need no entirely free vertex.
    assert whole("node/socket/core=2") == frozenset()
    assert whole("core=2") == frozenset()
    assert whole("slot/node{-x}/core=2") == {"core"}
    assert whole("slot/memory=4{unit:GB}") == frozenset()
    # Parts landing on different nodes: only what every part needs.
    assert whole("[slot{a}/socket;slot{b}/node]") == frozenset()
    assert whole("[slot{a}/socket;slot{b}/node/socket]") == {"socket"}
    assert whole("[slot{a}/socket;core=1]") == frozenset()


@pytest.mark.parametrize("seed", range(150))
def test_whole_types_hold_on_every_node_used(seed: int) -> None:
    """The SQL filter keeps only nodes with an entirely free vertex of each whole type: on
    random jobs and partly booked inventories, every node of every placement the allocator
    finds has one before the booking (the filter never hides a placement)."""
    rng = random.Random(seed)
    root = cluster([_random_inventory(rng) for _ in range(rng.randint(1, 3))])
    for _ in range(rng.randint(0, 3)):
        requests = build_requests(parse_shape_resources(_random_shape(rng)))
        for policy in ("first", "pack"):
            placement = place_requests(root, requests, policy).placement  # type: ignore[arg-type]
            if placement is None:
                continue
            for node in placement.nodes():
                for type_ in whole_types(requests):
                    assert any(v.type == type_ and v.pristine for v in node.subtree()), (
                        seed,
                        type_,
                    )
        if placement is not None:
            apply_bookings(placement.bookings())


@pytest.mark.parametrize(
    "inventory",
    ["node=2/core", "slot/core", "node/core=2+", "node/memory=4{unit:GB}/core", "node/node"],
)
def test_inventory_errors(inventory: str) -> None:
    with pytest.raises(InventoryError):
        parse_inventory(inventory)


def test_inventory_numbering() -> None:
    parsed = parse_inventory("node/[socket=2/[core=16;gpu=2];memory=256{unit:GB}]")
    cores = [v.index for v in parsed.vertices if v.type == "core"]
    assert cores == list(range(32))
    (memory,) = [v for v in parsed.vertices if v.type == "memory"]
    assert (memory.size, memory.unit) == (256, "GB")
    assert parse_inventory("core=4").vertices[0].type == "node"


# -- brute force ----------------------------------------------------------------------------


def _subtree(vertex: Vertex) -> Iterator[Vertex]:
    yield vertex
    for child in vertex.children:
        yield from _subtree(child)


def _pristine(vertex: Vertex) -> bool:
    return all(not v.held and not v.shared for v in _subtree(vertex))


def _reference_then(requests, context, taken, excl, then) -> bool:  # type: ignore[no-untyped-def]
    """Like _reference, but the success continuation gets the taken sets (continuation
    passing, so that choices inside one part constrain the rest)."""
    if not requests:
        return bool(then(taken, excl))
    request, rest = requests[0], requests[1:]

    def candidates(vertex: Vertex) -> Iterator[Vertex]:
        for child in vertex.children:
            if child.held or child.key in excl:
                continue
            if child.key in taken:
                yield from candidates(child)
            elif child.type == request.type:
                yield child
            else:
                yield from candidates(child)

    if request.type == "slot":
        anchors = [context]
        for n in itertools.takewhile(lambda n: n <= 6, count_values(request.count)):
            for combo in itertools.combinations_with_replacement(anchors, n):

                def after_slots(t, e):  # type: ignore[no-untyped-def]
                    return _reference_then(rest, context, t, e, then)

                if _slots_then(request, list(combo), context, taken, excl, after_slots):
                    return True
        return False
    found = list(candidates(context))
    for n in itertools.takewhile(lambda n: n <= len(found), count_values(request.count)):
        for combo in itertools.combinations(found, n):
            if request.exclusive and any(
                not _pristine(v) or any(x.key in taken for x in _subtree(v)) for v in combo
            ):
                continue
            if _chosen_then(
                request,
                list(combo),
                context,
                taken,
                excl,
                lambda t, e: _reference_then(rest, context, t, e, then),
            ):
                return True
    return False


def _chosen_then(request, combo, context, taken, excl, then) -> bool:  # type: ignore[no-untyped-def]
    if not combo:
        return bool(then(taken, excl))
    head, *tail = combo
    new_taken = taken | {head.key}
    new_excl = excl | {head.key} if request.exclusive else excl
    return _reference_then(
        request.children,
        head,
        new_taken,
        new_excl,
        lambda t, e: _chosen_then(request, tail, context, t, e, then),
    )


def _slots_then(request, anchors, context, taken, excl, then) -> bool:  # type: ignore[no-untyped-def]
    if not anchors:
        return bool(then(taken, excl))
    head, *tail = anchors
    return _reference_then(
        request.children,
        head,
        taken,
        excl,
        lambda t, e: _slots_then(request, tail, context, t, e, then),
    )


def _exists(root: Vertex, requests: tuple) -> bool:  # type: ignore[type-arg]
    """Top level: slots above the node may anchor on any node (one each)."""

    def go(reqs, taken, excl) -> bool:  # type: ignore[no-untyped-def]
        if not reqs:
            return True
        request, rest = reqs[0], reqs[1:]
        if request.type == "slot" and not request.holds_nodes:
            nodes = [v for v in _subtree(root) if v.type == "node"]
            for n in itertools.takewhile(lambda n: n <= 6, count_values(request.count)):
                for combo in itertools.combinations_with_replacement(nodes, n):
                    if _slots_then(
                        request, list(combo), root, taken, excl, lambda t, e: go(rest, t, e)
                    ):
                        return True
            return False
        return _reference_then((request,), root, taken, excl, lambda t, e: go(rest, t, e))

    return go(requests, frozenset(), frozenset())


def _count(rng: random.Random) -> str:
    return rng.choice(["1", "2", "3", "1-3", "2+", "1,3", "2"])


def _random_shape(rng: random.Random) -> str:
    c = lambda: _count(rng)  # noqa: E731
    x = lambda: rng.choice(["", "{x}", "{-x}"])  # noqa: E731
    return rng.choice(
        [
            f"slot={c()}/node{x()}/core={c()}",
            f"slot={c()}/core={c()}",
            f"slot={c()}/[core={c()};gpu{x()}]",
            f"node={c()}{x()}/socket={c()}{x()}/core={c()}",
            f"node{x()}/[core={c()};socket{x()}/core={c()}]",
            f"slot={c()}/socket{x()}/[core={c()};gpu]",
            f"node/slot={c()}/core={c()}",
        ]
    )


def _random_inventory(rng: random.Random) -> str:
    sockets = rng.randint(1, 2)
    cores = rng.randint(1, 3)
    gpus = rng.randint(0, 1)
    inside = f"core={cores}" if not gpus else f"[core={cores};gpu={gpus}]"
    return f"node/socket={sockets}/{inside}"


def _check_valid(placement: Placement) -> None:
    """Every chosen vertex is free enough for its booking, and nothing is taken twice."""
    keys = [s.vertex.key for s in placement.walk() if s.vertex is not None]
    assert len(keys) == len(set(keys))
    for booking in placement.bookings():
        if booking.mode == "exclusive":
            assert _pristine(booking.vertex)
        else:
            assert not booking.vertex.held
    for selection in placement.walk():
        count = selection.request.count
        if selection.request.type == "slot" or selection.vertex is None:
            continue
        siblings: list[Selection] = [c for c in selection.children if c.request.type != "slot"]
        for child in siblings:
            node: Vertex | None = child.vertex
            while node is not None and node is not selection.vertex:
                node = node.parent
            assert node is selection.vertex, "a child lies outside its parent"
        del count


@pytest.mark.parametrize("seed", range(150))
def test_random_against_brute_force(seed: int) -> None:
    """Random small jobspecs and inventories (some vertices already booked): the allocator
    finds an allocation exactly when the exhaustive reference says one exists, and what it
    books is free and never overlaps what was booked before."""
    rng = random.Random(seed)
    root = cluster([_random_inventory(rng) for _ in range(rng.randint(1, 3))])
    for _ in range(rng.randint(0, 2)):  # earlier jobs
        earlier = place_requests(root, build_requests(parse_shape_resources(_random_shape(rng))))
        if earlier.placement is not None:
            _check_valid(earlier.placement)
            apply_bookings(earlier.placement.bookings())
    shape = _random_shape(rng)
    requests = build_requests(parse_shape_resources(shape))
    for policy in ("first", "pack"):
        outcome = place_requests(root, requests, policy)  # type: ignore[arg-type]
        assert not outcome.exhausted
        assert (outcome.placement is not None) == _exists(root, requests), (shape, policy)
        if outcome.placement is not None:
            _check_valid(outcome.placement)


def _fields(vertex: Vertex) -> tuple[Any, ...]:
    parent = vertex.parent
    return (
        vertex.key,
        vertex.type,
        vertex.index,
        vertex.unit,
        vertex.size,
        vertex.used,
        vertex.held,
        vertex.shared,
        vertex.worker,
        vertex.rank,
        vertex.place,
        list(vertex.free.items()),
        vertex.pristine,
        None if parent is None else parent.key,
        [_fields(child) for child in vertex.loaded_children],
    )


def test_built_vertices_equal_constructed_ones() -> None:
    """Random subtrees (held, shared, drawn pools; a worker given or inherited): the fast
    constructor leaves every field, free count and the order of the counts as __init__."""
    rng = random.Random(3)
    for _ in range(300):
        seed = rng.random()
        slow = _random_subtree(0, False, random.Random(seed), iter(range(1, 1000)))
        fast = _random_subtree(0, True, random.Random(seed), iter(range(1, 1000)))
        assert _fields(fast) == _fields(slow)


def _random_subtree(depth: int, fast: bool, state: random.Random, keys: Iterator[int]) -> Vertex:
    fanout = state.randrange(4) if depth < 3 else 0
    children = [_random_subtree(depth + 1, fast, state, keys) for _ in range(fanout)]
    unit = state.choice([None, None, "GB"]) if not children else None
    size = state.randrange(1, 5) if unit else 1
    used = state.randrange(size + 1) if unit else 0
    held = state.random() < 0.2
    shared = state.randrange(2)
    worker = state.choice([None, "n1"])
    rank = 7 if worker else None
    key = next(keys)
    type_ = state.choice(["socket", "core", "gpu"])
    place = (1, key, key + 3)
    if fast:
        return Vertex.built(
            key, type_, key, unit, size, used, held, shared, worker, rank, children, place
        )
    return Vertex(
        key,
        type_,
        key,
        unit=unit,
        size=size,
        used=used,
        held=held,
        shared=shared,
        worker=worker,
        rank=rank,
        children=children,
        place=place,
    )
