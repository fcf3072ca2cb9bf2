"""Choosing the master queue of a parallel job when some instances cannot be master
(complex(5), Grid Engine 6.2u2+: an instance that cannot supply a JOB consumable may take
slave tasks but cannot be master; which instance of the allocation is the master)."""

from __future__ import annotations

from app.matching.gridengine.master import choose_master, master_first
from app.matching.gridengine.parallel import Offered


def _offers(*pairs: tuple[int, str]) -> list[Offered]:
    return [Offered(qi, host, 4, 8) for qi, host in pairs]


def test_the_master_is_the_last_capable_instance_of_the_first_host_that_has_one() -> None:
    """Grid Engine 6.2u5 and 8.1.9 source/libs/sched/sge_select_queue.c,
    parallel_tag_queues_suitable4job(): on the first host visit that grants slots to an
    instance that can be master, each such instance is moved to the front of the granted
    list in turn, so the last one is the master; later hosts move nothing."""
    offers = _offers((11, "h1"), (12, "h1"), (13, "h2"), (14, "h2"))
    every = frozenset({11, 12, 13, 14})
    assert choose_master({11: 2, 12: 2, 13: 1}, offers, every, "$fill_up") == 12
    assert choose_master({11: 2, 12: 2}, offers, frozenset({11, 13, 14}), "$fill_up") == 11
    assert choose_master({11: 2, 12: 2, 13: 1, 14: 1}, offers, frozenset({13, 14}), "4") == 14
    assert choose_master({11: 2, 13: 1}, offers, frozenset({12}), "$fill_up") is None


def test_round_robin_visits_each_host_once_per_round() -> None:
    """parallel_tag_queues_suitable4job(): under $round_robin each host visit grants one
    slot; h1's first round grants 11 (not capable), h2's grants 13 (capable): 13 is the
    master although 12 on h1 is capable and comes first in queue order."""
    offers = [Offered(11, "h1", 1, 8), Offered(12, "h1", 4, 8), Offered(13, "h2", 4, 8)]
    capable = frozenset({12, 13})
    assert choose_master({11: 1, 12: 1, 13: 2}, offers, capable, "$round_robin") == 13
    assert choose_master({11: 1, 12: 1, 13: 2}, offers, capable, "$fill_up") == 12


def test_master_first_moves_only_the_first_capable_instance_to_the_front() -> None:
    assert master_first([11, 12, 13, 14], frozenset({13, 14})) == [13, 11, 12, 14]
    assert master_first([11, 12], frozenset({11})) == [11, 12]
    assert master_first([11, 12], frozenset()) is None
