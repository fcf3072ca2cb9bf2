"""Choosing the master queue of a parallel job when some instances cannot be master
(complex(5), Grid Engine 6.2u2+: an instance that cannot supply a JOB consumable may take
slave tasks but cannot be master; the master is the first queue of the allocation)."""

from __future__ import annotations

from app.matching.gridengine.master import choose_master, master_first


def test_the_master_is_the_first_assigned_instance_that_can_be_master() -> None:
    order = [11, 12, 13]
    assert choose_master({11: 2, 12: 2}, order, frozenset({11, 12, 13})) == 11
    assert choose_master({11: 2, 12: 2}, order, frozenset({12, 13})) == 12
    assert choose_master({11: 2, 13: 1}, order, frozenset({12})) is None


def test_master_first_moves_only_the_first_capable_instance_to_the_front() -> None:
    assert master_first([11, 12, 13, 14], frozenset({13, 14})) == [13, 11, 12, 14]
    assert master_first([11, 12], frozenset({11})) == [11, 12]
    assert master_first([11, 12], frozenset()) is None
