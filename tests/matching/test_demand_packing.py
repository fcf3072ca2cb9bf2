"""The packing behind demand's worker counts (app/matching/demand/packing.py): first fit
of slots and vertices onto new workers, in groups of equal workers, within a limit."""

from __future__ import annotations

from app.matching.demand.packing import Item, Packer, per_worker


def test_jobs_fill_a_worker_on_their_tightest_dimension() -> None:
    assert per_worker({"slots": 8, "core": 8}, {"slots": 1, "core": 3}) == 2
    assert per_worker({"slots": 8}, {"slots": 1, "gpu": 1}) == 0


def test_categories_share_the_room_left_on_new_workers() -> None:
    packer = Packer({"slots": 4}, limit=None)
    assert packer.add(Item(1, 5, {"slots": 2})) == 5  # 3 workers, the last half full
    assert packer.workers == 3
    assert packer.add(Item(2, 2, {"slots": 1})) == 2  # into the half-full worker
    assert packer.workers == 3
    assert packer.add(Item(3, 1, {"slots": 1})) == 1
    assert packer.workers == 4


def test_the_limit_caps_the_workers_and_the_jobs_placed() -> None:
    packer = Packer({"slots": 2}, limit=2)
    assert packer.add(Item(1, 7, {"slots": 1})) == 4
    assert packer.workers == 2
    assert packer.add(Item(2, 1, {"slots": 1})) == 0


def test_jobs_on_several_nodes_take_what_the_allocations_took() -> None:
    packer = Packer({"slots": 8, "core": 8}, limit=None)
    # Two jobs were allocated for real: 1 new worker for the first, 3 for both.
    item = Item(1, 4, {"slots": 1, "core": 8}, allocated=(1, 3), extrapolate=True)
    assert packer.add(item) == 4
    assert packer.workers == 3 + 2 + 2
    capped = Packer({"slots": 8, "core": 8}, limit=4)
    assert capped.add(item) == 2
    # Without extrapolation only the jobs the simulation started count.
    assert Packer({"slots": 8}, limit=None).add(Item(1, 4, {"slots": 1}, allocated=(2,))) == 1
