"""The packing behind demand's worker counts (app/matching/demand/packing.py): first fit
of slots and vertices onto new workers, in groups of equal workers, within a limit; and
the mix over templates (app/matching/demand/mix.py)."""

from __future__ import annotations

from app.matching.demand.mix import Wanted, suggest
from app.matching.demand.packing import Item, Packer, per_worker
from app.matching.demand.simulate import SLOTS, Runs, Simulated
from app.matching.demand.templates import Template


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


def _simulated(name: str, cost: float, runs: list[int], max_count: int | None = None) -> Simulated:
    """A template whose one new worker has one slot and can start ``runs``' categories."""
    template = Template(name, {}, cost, max_count)
    return Simulated(template, {SLOTS: 1}, {c: Runs(c, {SLOTS: 1}, (), False) for c in runs})


def test_a_template_is_sized_for_the_jobs_its_workers_could_take_from_another() -> None:
    # Found by tests/matching/test_demand_truth.py: a java-11 box (t0) runs categories 3
    # (java 11, two jobs) and 4 (any worker, one job); a cheaper box (t1) runs only 4.
    # The packing meant 4 for t1, but a pull takes the oldest job its worker fits: a t0
    # worker may take 4's job first and leave a java-11 job that no t1 worker can run.
    t0, t1 = _simulated("t0", 3.0, [3, 4]), _simulated("t1", 1.0, [4])
    mix = suggest([t0, t1], [Wanted(3, 2, 0), Wanted(4, 1, 0)])
    workers = {item.template: item.workers for item in mix.items}
    assert workers == {"t0": 3, "t1": 1}
    assert mix.starts == {3: 2, 4: 1}
    assert mix.unrunnable == []


def test_jobs_are_no_longer_said_to_start_when_a_limit_cannot_hold_what_may_be_taken() -> None:
    t0, t1 = _simulated("t0", 3.0, [3, 4], max_count=2), _simulated("t1", 1.0, [4])
    mix = suggest([t0, t1], [Wanted(3, 2, 0), Wanted(4, 1, 0)])
    # t0's two workers may both take other jobs (4's) first: one java-11 job is withdrawn.
    assert mix.starts == {3: 1, 4: 1}
    assert [(u.category_id, u.jobs, u.beyond_limits) for u in mix.unrunnable] == [(3, 1, True)]
    # The template's own count of jobs says the same as the starts.
    assert {item.template: item.jobs for item in mix.items} == {"t0": 1, "t1": 1}


def test_templates_whose_workers_run_different_categories_are_sized_for_their_own() -> None:
    mix = suggest(
        [_simulated("a", 1.0, [1]), _simulated("b", 1.0, [2])], [Wanted(1, 2, 0), Wanted(2, 3, 0)]
    )
    assert {item.template: item.workers for item in mix.items} == {"a": 2, "b": 3}
