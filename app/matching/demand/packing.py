"""Packing waiting jobs onto new workers of one template: first fit over what each job
books (slots, and per node the vertices of an inventory) against what one new worker has,
counted in groups of equal workers so that the cost follows the number of categories, not
of jobs. A job on several nodes takes that many distinct workers.

Pure: the sizes come from the categories and the capacity from a worker of the template
registered in a savepoint (app/matching/demand/simulate.py); which jobs a template's
worker can start at all is the simulation's answer, not this module's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: More workers than any limit: jobs that the simulation could not start.
MANY = 2**62


@dataclass(frozen=True)
class Item:
    """``count`` waiting jobs of one category, each booking ``size`` on one worker; for
    jobs on several nodes, ``allocated[k]`` is how many new workers the real allocations
    of the simulation took to start the first k + 1 of them."""

    key: int
    count: int
    size: dict[str, int]
    allocated: tuple[int, ...] = ()
    #: Whether jobs beyond ``allocated`` take as many new workers each as the last did.
    extrapolate: bool = False


def per_worker(capacity: dict[str, int], size: dict[str, int]) -> int:
    """How many jobs of ``size`` one worker with ``capacity`` free holds at once."""
    counts = [capacity.get(name, 0) // amount for name, amount in size.items() if amount > 0]
    return min(counts) if counts else 0


@dataclass
class _Group:
    """``workers`` new workers with ``free`` left on each."""

    workers: int
    free: dict[str, int]


def _less(free: dict[str, int], size: dict[str, int], jobs: int) -> dict[str, int]:
    return {name: amount - size.get(name, 0) * jobs for name, amount in free.items()}


class Packer:
    """New workers of one template, at most ``limit`` (None: no limit), filled first fit."""

    def __init__(self, capacity: dict[str, int], limit: int | None) -> None:
        self.capacity = capacity
        self.limit = limit
        self.groups: list[_Group] = []
        self.workers = 0

    def room(self) -> float:
        """How many more workers may be added."""
        return math.inf if self.limit is None else self.limit - self.workers

    def add(self, item: Item) -> int:
        """Place as many jobs of ``item`` as the limit lets; how many were placed."""
        if item.allocated:
            return self._several(item)
        placed = self._fill(item)
        left = item.count - placed
        fit = per_worker(self.capacity, item.size)
        if left <= 0 or fit == 0:
            return placed
        new = int(min(math.ceil(left / fit), self.room()))
        jobs = min(left, new * fit)
        self._open(new, item.size, jobs, fit)
        return placed + jobs

    def _fill(self, item: Item) -> int:
        """First fit into the workers already added."""
        left = item.count
        groups: list[_Group] = []
        for group in self.groups:
            fit = per_worker(group.free, item.size)
            if left <= 0 or fit == 0:
                groups.append(group)
                continue
            take = min(left, group.workers * fit)
            full, rest = divmod(take, fit)
            if full:
                groups.append(_Group(full, _less(group.free, item.size, fit)))
            if rest:
                groups.append(_Group(1, _less(group.free, item.size, rest)))
            untouched = group.workers - full - (1 if rest else 0)
            if untouched:
                groups.append(_Group(untouched, group.free))
            left -= take
        self.groups = groups
        return item.count - left

    def _open(self, workers: int, size: dict[str, int], jobs: int, fit: int) -> None:
        if workers <= 0:
            return
        full, rest = divmod(jobs, fit)
        if full:
            self.groups.append(_Group(full, _less(self.capacity, size, fit)))
        if rest:
            self.groups.append(_Group(1, _less(self.capacity, size, rest)))
        self.workers += workers

    def _several(self, item: Item) -> int:
        """Jobs on several nodes get workers of their own, as many as the simulation's
        allocations took; beyond the jobs it allocated, each more job takes as many as
        the last one did (at least one)."""
        table = item.allocated

        def workers_for(jobs: int) -> int:
            if jobs <= 0:
                return 0
            if jobs <= len(table):
                return table[jobs - 1]
            if not item.extrapolate:
                return MANY
            step = max(table[-1] - (table[-2] if len(table) > 1 else 0), 1)
            return table[-1] + step * (jobs - len(table))

        low, high = 0, item.count
        while low < high:
            middle = (low + high + 1) // 2
            needed = workers_for(middle)
            if needed < MANY and needed <= self.room():
                low = middle
            else:
                high = middle - 1
        self.workers += workers_for(low)
        return low
