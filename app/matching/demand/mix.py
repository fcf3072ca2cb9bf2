"""Which new workers to add: per template alone, and the suggested mix.

Each category that a template's new worker can start goes, largest first, to the
template that runs its jobs for the least cost per job (a worker's cost over the jobs of
the category one worker holds; then the one holding more, then by name) among those
whose ``max_count`` still has room for all of them, else to the cheapest with any room;
the jobs left over are beyond the templates' limits. The counts are the packing's
(app/matching/demand/packing.py). Greedy: it aims at the least total cost, then the
fewest workers, without searching every combination.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.matching.demand.packing import Item, Packer, per_worker
from app.matching.demand.simulate import Simulated
from app.wire.demand import MixItem, TemplateDemand, Unrunnable


@dataclass(frozen=True)
class Wanted:
    """Waiting jobs of one category that today's workers cannot start now."""

    category_id: int
    jobs: int
    nodes: int


def _item(simulated: Simulated, wanted: Wanted) -> Item:
    runs = simulated.runs[wanted.category_id]
    return Item(wanted.category_id, wanted.jobs, runs.size, runs.allocated, runs.extrapolate)


def _packer(simulated: Simulated) -> Packer:
    return Packer(simulated.capacity, simulated.template.max_count)


def _largest_first(wanted: list[Wanted]) -> list[Wanted]:
    return sorted(wanted, key=lambda w: (-w.jobs * max(w.nodes, 1), w.category_id))


def alone(simulations: list[Simulated], wanted: list[Wanted]) -> list[TemplateDemand]:
    """Each template alone: the new workers of it that would start every waiting job it
    can (at most its ``max_count``)."""
    answers = []
    for simulated in simulations:
        packer = _packer(simulated)
        jobs = 0
        categories = []
        for want in _largest_first(wanted):
            if want.category_id in simulated.runs:
                placed = packer.add(_item(simulated, want))
                jobs += placed
                if placed:
                    categories.append(want.category_id)
        answers.append(
            TemplateDemand(
                template=simulated.template.name,
                workers=packer.workers,
                jobs=jobs,
                categories=sorted(categories),
                cost=packer.workers * simulated.template.cost,
            )
        )
    return answers


@dataclass(frozen=True)
class Mix:
    """The suggested new workers per template, the jobs they start per category, and
    the waiting jobs left (no template runs them, or their templates' limits are used)."""

    items: list[MixItem]
    starts: dict[int, int]
    chosen: dict[int, str]
    unrunnable: list[Unrunnable]

    @property
    def workers(self) -> int:
        return sum(item.workers for item in self.items)


def _cost_per_job(simulated: Simulated, want: Wanted) -> tuple[float, int, str]:
    runs = simulated.runs[want.category_id]
    if runs.allocated:
        # New workers per job, as the simulation's allocations took them.
        per_job = runs.allocated[-1] / len(runs.allocated)
        return (simulated.template.cost * per_job, 0, simulated.template.name)
    held = max(per_worker(simulated.capacity, runs.size), 1)
    return (simulated.template.cost / held, -held, simulated.template.name)


def suggest(simulations: list[Simulated], wanted: list[Wanted]) -> Mix:
    """The suggested mix (see the module's words)."""
    packers = {s.template.name: _packer(s) for s in simulations}
    jobs: dict[str, int] = {s.template.name: 0 for s in simulations}
    categories: dict[str, list[int]] = {s.template.name: [] for s in simulations}
    starts: dict[int, int] = {}
    chosen: dict[int, str] = {}
    unrunnable: list[Unrunnable] = []
    for want in _largest_first(wanted):
        able = sorted(
            (s for s in simulations if want.category_id in s.runs),
            key=lambda s: _cost_per_job(s, want),
        )
        if not able:
            unrunnable.append(Unrunnable(want.category_id, want.jobs, beyond_limits=False))
            continue
        left = want.jobs
        for simulated in able:
            if left <= 0:
                break
            name = simulated.template.name
            placed = packers[name].add(_item(simulated, Wanted(want.category_id, left, want.nodes)))
            if placed:
                jobs[name] += placed
                categories[name].append(want.category_id)
                starts[want.category_id] = starts.get(want.category_id, 0) + placed
                chosen.setdefault(want.category_id, name)
                left -= placed
                if want.nodes > 1:
                    # Jobs on several nodes go to one template only: its simulation
                    # allocated them among today's workers and its own new ones, not
                    # beside another template's. Split, each template's part counted
                    # on the same free nodes of today's workers: a 2-node job's
                    # simulations each took a node of one existing worker, and with both
                    # templates' workers added the first allocation took the two new
                    # ones, leaving the second job one node (the property test of
                    # tests/matching/test_demand_truth.py).
                    break
        if left > 0:
            unrunnable.append(Unrunnable(want.category_id, left, beyond_limits=True))
    withdrawn = _size_for_poaching(simulations, wanted, packers, categories, jobs, starts)
    for category_id, jobs_left in withdrawn.items():
        unrunnable.append(Unrunnable(category_id, jobs_left, beyond_limits=True))
    unrunnable = _one_per_category(unrunnable)
    items = [
        MixItem(name, packers[name].workers, jobs[name], sorted(categories[name]))
        for name in sorted(packers)
        if packers[name].workers
    ]
    return Mix(items, starts, chosen, sorted(unrunnable, key=lambda u: u.category_id))


def _size_for_poaching(
    simulations: list[Simulated],
    wanted: list[Wanted],
    packers: dict[str, Packer],
    categories: dict[str, list[int]],
    jobs: dict[str, int],
    starts: dict[int, int],
) -> dict[int, int]:
    """A pull takes the oldest job its worker fits, not the one the packing meant for
    it: a new worker of one template may take the jobs meant for another template's and
    leave its own waiting (the property test of tests/matching/test_demand_truth.py
    found a java-11 box taking a job meant for a cheaper box, which could not run the
    java-11 job left). So each template of the mix is sized for the other templates'
    jobs on one node that its workers could take as well; where its ``max_count`` cannot
    hold them, as many of its own jobs are no longer said to start: they are returned,
    by category."""
    withdrawn: dict[int, int] = {}
    for simulated in simulations:
        name = simulated.template.name
        if not packers[name].workers:
            continue
        own = set(categories[name])
        poachable = [
            want
            for want in _largest_first(wanted)
            if want.category_id not in own
            and want.category_id in simulated.runs
            and want.nodes <= 1
            and starts.get(want.category_id, 0) > 0
        ]
        short = 0
        for want in poachable:
            count = starts[want.category_id]
            short += count - packers[name].add(
                _item(simulated, Wanted(want.category_id, count, want.nodes))
            )
        for category_id in sorted(own, reverse=True):
            if short <= 0:
                break
            taken = min(short, starts[category_id])
            starts[category_id] -= taken
            jobs[name] -= taken
            withdrawn[category_id] = withdrawn.get(category_id, 0) + taken
            short -= taken
    return withdrawn


def _one_per_category(unrunnable: list[Unrunnable]) -> list[Unrunnable]:
    """The jobs left of each category summed into one entry per category and kind: a
    category's jobs beyond one template's limit and those withdrawn for another's are
    the same answer (beyond the limits)."""
    summed: dict[tuple[int, bool], int] = {}
    for item in unrunnable:
        key = (item.category_id, item.beyond_limits)
        summed[key] = summed.get(key, 0) + item.jobs
    return [Unrunnable(c, n, beyond_limits=b) for (c, b), n in summed.items()]
