"""queue_conf(5) ``load_thresholds`` (app/notations/gridengine/load_thresholds.py).

Sources: queue_conf(5) of Grid Engine 6.2u5 ("a comma separated list with each list
element consisting of the complex_name of a load value, an equal sign and the threshold
value", e.g. ``load_avg=1.75,users_logged_in=5``), and ``load_check_alarm()`` /
``resource_cmp()`` in source/libs/sched/sge_select_queue.c (V62u5_TAG): the queue is in
alarm when ``load RELOP threshold`` holds with the attribute's relop."""

from __future__ import annotations

import pytest

from app.notations.gridengine.attribute_table import default_table
from app.notations.gridengine.load_thresholds import (
    LoadThresholdError,
    parse_load_thresholds,
)

TABLE = default_table()


def test_a_list_parses_with_shortcuts_and_units_and_prints_as_queue_conf_does() -> None:
    parsed = parse_load_thresholds(" nla=1.75, mem_free=1G ,np_load_avg=2", TABLE)
    # A later threshold of the same attribute replaces the earlier one.
    assert parsed.text() == "np_load_avg=2,mem_free=1G"
    assert [item.limit for item in parsed] == [2.0, 1024.0**3]
    assert parse_load_thresholds("NONE", TABLE).text() == "NONE"
    assert not parse_load_thresholds("", TABLE)


@pytest.mark.parametrize(
    ("text", "load", "alarm"),
    [
        ("load_avg=2", 2.0, True),  # relop >=: at the threshold already
        ("load_avg=2", 1.99, False),
        ("mem_free=1G", 1024.0**3, True),  # relop <=: at or below
        ("mem_free=1G", 1024.0**3 + 1, False),
    ],
)
def test_alarm_is_load_relop_threshold(text: str, load: float, alarm: bool) -> None:
    (threshold,) = parse_load_thresholds(text, TABLE)
    assert threshold.exceeded(load) is alarm


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("np_load_avg", 11, "'=' and a value"),
        ("load_avg=1,nosuch=2", 11, "the name of a load value"),
        ("arch=lx-amd64", 0, "a numeric, non-consumable attribute such as np_load_avg"),
        ("slots=4", 0, "a numeric, non-consumable attribute such as np_load_avg"),
        ("load_avg= 1x", 10, "one multiplier letter (k K m M g G) or end of value"),
        ("load_avg=1,,", 11, "name=value"),
    ],
)
def test_errors_name_the_position_and_what_was_expected(
    text: str, position: int, expected: str
) -> None:
    with pytest.raises(LoadThresholdError) as raised:
        parse_load_thresholds(text, TABLE)
    error = raised.value
    assert (error.notation, error.position, error.expected) == (
        "queue_conf load_thresholds",
        position,
        expected,
    )
