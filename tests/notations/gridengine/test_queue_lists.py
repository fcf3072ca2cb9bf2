"""``qsub -q`` / ``-masterq`` queue lists (app/notations/gridengine/queue_lists.py).

Sources: sge_types(1) of Grid Engine 6.2u5 (``wc_queue_list := wc_queue[,wc_queue,...]``,
``wc_queue := wc_cqueue|wc_qdomain|wc_qinstance``, ``wc_qinstance := wc_cqueue@wc_host``),
and ``qref_cq_rejected()`` in source/libs/sgeobj/sge_qref.c (tag V62u5_TAG): the cluster
queue part is evaluated with ``sge_eval_expression(TYPE_STR, ...)``, the host part with
``TYPE_HOST`` (case-insensitive), and a list accepts an instance when one item does.
"""

from __future__ import annotations

import pytest

from app.notations.errors import NotationError
from app.notations.gridengine.queue_lists import (
    MAX_QUEUE_REFERENCES,
    QueueList,
    QueueListError,
    QueueLists,
    QueueReference,
    parse_queue_list,
)


def test_items_are_queues_or_queue_instances_in_the_order_given() -> None:
    parsed = parse_queue_list(" all.q , gpu*@node[0-9]* ,big.q@H1")
    assert parsed.references == (
        QueueReference("all.q"),
        QueueReference("gpu*", "node[0-9]*"),
        QueueReference("big.q", "H1"),
    )
    assert parsed.category_text() == "all.q,gpu*@node[0-9]*,big.q@H1"
    assert parse_queue_list("").category_text() == "NONE"
    assert not parse_queue_list("  ")


@pytest.mark.parametrize(
    ("item", "queue", "host", "expected"),
    [
        # sge_qref.c: a plain cluster queue name names the queue on every host.
        ("all.q", "all.q", "h1", True),
        ("all.q", "all.q2", "h1", False),
        # TYPE_STR: the cluster queue is case-sensitive ...
        ("All.q", "all.q", "h1", False),
        # ... TYPE_HOST: the host is not.
        ("all.q@H1", "all.q", "h1", True),
        ("all.q@h1", "all.q", "h2", False),
        # sge_types(1) wildcards and the expression operators of string requests.
        ("*@node[0-9]", "any.q", "node7", True),
        ("*@node[0-9]", "any.q", "node10", False),
        ("a?.q", "ab.q", "h", True),
        ("!gpu.q", "all.q", "h", True),
        ("!gpu.q", "gpu.q", "h", False),
        ("all.q|big.q@h1", "big.q", "h1", True),
        ("*@!h1", "all.q", "h1", False),
        ("*@!h1", "all.q", "h2", True),
    ],
)
def test_an_item_names_an_instance_as_qref_cq_rejected_does(
    item: str, queue: str, host: str, expected: bool
) -> None:
    assert parse_queue_list(item).contains(queue, host) is expected


def test_a_list_accepts_what_one_item_names_and_soft_items_count_each() -> None:
    listed = parse_queue_list("a.q,b.q@h2")
    assert listed.contains("a.q", "h9") and listed.contains("b.q", "h2")
    assert not listed.contains("b.q", "h1")
    # compute_soft_violations() (sge_select_queue.c): one violation per item that rejects.
    assert listed.rejections("a.q", "h2") == 1
    assert listed.rejections("c.q", "h2") == 2


def test_masterq_instances_pass_the_hard_list_and_take_the_master_task_only() -> None:
    """sge_queue_match_static() (sge_select_queue.c, 6.2u5) skips the -q test for an
    instance -masterq names; parallel_tag_queues_suitable4job() gives it one slot."""
    lists = QueueLists(parse_queue_list("all.q"), parse_queue_list("master.q"), QueueList())
    assert lists.allows("all.q", "h1") and lists.allows("master.q", "h1")
    assert not lists.allows("other.q", "h1")
    assert lists.can_be_master("master.q", "h1") and not lists.can_be_master("all.q", "h1")
    assert lists.master_only("master.q", "h1") and not lists.master_only("all.q", "h1")
    # Without -q every instance may take slave tasks.
    only_master = QueueLists(master=parse_queue_list("master.q"))
    assert only_master.allows("other.q", "h1") and not only_master.master_only("master.q", "h1")


@pytest.mark.parametrize(
    ("text", "option", "position", "expected"),
    [
        ("all.q,,b.q", "-q", 6, "a queue, queue@host or a wildcard pattern"),
        ("all.q, ", "-q", 7, "a queue, queue@host or a wildcard pattern"),
        ("@h1", "-masterq", 0, "a cluster queue before '@', e.g. \"*@h1\""),
        ("all.q@", "-q", 6, "a host or wildcard pattern"),
        ("all.q@@", "-q", 7, "a host group or wildcard pattern"),
        ("a.q,@@linux", "-q", 4, "a cluster queue before '@', e.g. \"*@@linux\""),
        ("a.q,b.q@(h1", "-soft -q", 11, "')'"),
        ("a.q,a b", "-q", 5, "',' between items, no blanks inside one"),
    ],
)
def test_errors_name_the_option_the_position_and_what_was_expected(
    text: str, option: str, position: int, expected: str
) -> None:
    with pytest.raises(QueueListError) as raised:
        parse_queue_list(text, option=option)
    error = raised.value
    assert isinstance(error, NotationError)
    found = (error.notation, error.position, error.expected)
    assert found == (f"qsub {option}", position, expected)
    assert error.as_dict()["notation"] == f"qsub {option}"


def test_the_number_of_items_is_bounded_before_any_matching() -> None:
    parse_queue_list(",".join(["q"] * MAX_QUEUE_REFERENCES))
    with pytest.raises(QueueListError, match="more than 256 items"):
        parse_queue_list(",".join(["q"] * (MAX_QUEUE_REFERENCES + 1)))
