"""Value-type resources (app.notations.momotor.typed_groups): typed groups of comparisons.

Momotor's documentation ("Value type resources") names the idea (``ram >= 1 GiB`` against ``ram =
2147483648``); the strength table is ours and documented in the tag_values module docstring.
Numbers follow docs/notations/gridengine.md#values via app.notations.quantities.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.notations.momotor.errors import GroupKindMismatchError, TagsError
from app.notations.momotor.resources import Resources
from app.notations.momotor.strengths import NEUTRAL, STRONG, NoMatch
from app.notations.momotor.typed_groups import (
    Comparison,
    ComparisonSyntaxError,
    ConflictingValuesError,
    UnknownValueTypeError,
    ValueGroup,
    parse_quantity,
)
from app.notations.quantities import ValueType
from tests.support.thoroughness import examples

RAM = {"ram": "memory"}


def typed(text: str, declared: dict[str, str] | None = None) -> Resources:
    return Resources.from_string(text, typed=RAM if declared is None else declared)


def outcome(task: str, worker: str) -> object:
    try:
        return typed(task).match(typed(worker))
    except NoMatch:
        return "NoMatch"


def test_seed000_value_example() -> None:
    assert outcome("ram >= 1 GiB", "ram = 2147483648") == STRONG


# Strength table, every cell, with the condition on the job side and on the worker side.
TABLE = [
    # (condition, other side's value or None, expected)
    (">= 1G", "= 2G", STRONG),
    (">= 4G", "= 2G", "NoMatch"),
    (">= 1G", None, "NoMatch"),
    ("?>= 1G", "= 2G", STRONG),
    ("?>= 4G", "= 2G", NEUTRAL),
    ("?>= 1G", None, NEUTRAL),
]


@pytest.mark.parametrize(
    ("condition", "value", "want"),
    TABLE,
    ids=[f"tag_values-table-job-{c}-vs-{v}" for c, v, _ in TABLE],
)
def test_strength_table_job_condition(condition: str, value: str | None, want: object) -> None:
    assert outcome(f"ram: {condition}", f"ram: {value}" if value else "") == want


@pytest.mark.parametrize(
    ("condition", "value", "want"),
    TABLE,
    ids=[f"tag_values-table-worker-{c}-vs-{v}" for c, v, _ in TABLE],
)
def test_strength_table_worker_condition(condition: str, value: str | None, want: object) -> None:
    # The worker's condition judges the value the job states; same table.
    assert outcome(f"ram: {value}" if value else "", f"ram: {condition}") == want


def test_stated_values_alone_give_no_cell() -> None:
    assert outcome("ram = 1G", "ram = 2G") == NEUTRAL
    assert outcome("ram = 1G", "") == NEUTRAL
    assert outcome("", "ram = 1G") == NEUTRAL


def test_cells_combine_like_tags() -> None:
    # Minimum within the group, maximum across groups, tag groups unaffected.
    assert outcome("ram: >= 1G, ?<= 1M", "ram = 2G") == STRONG
    assert outcome("ram: >= 1G; lang: x", "ram = 2G; lang: x") == STRONG
    assert outcome("ram: >= 1G; lang: ?x", "ram = 2G; lang: ?y") == NEUTRAL
    assert outcome("ram: >= 1G, < 1.5G", "ram = 2G") == "NoMatch"
    assert outcome("ram: = 1G", "ram: <= 2G") == STRONG
    assert outcome("ram: = 1G", "ram: <= 2G; lang: ~x") == NEUTRAL  # lang has no cell


@pytest.mark.parametrize(
    ("operator", "holds_for"),
    [
        ("<", {1.0}),
        ("<=", {1.0, 2.0}),
        ("==", {2.0}),
        ("!=", {1.0, 3.0}),
        (">=", {2.0, 3.0}),
        (">", {3.0}),
    ],
    ids=lambda value: f"op-{value}" if isinstance(value, str) else "",
)
def test_every_operator(operator: str, holds_for: set[float]) -> None:
    declared = {"n": "int"}
    for worker_value in (1.0, 2.0, 3.0):
        task = Resources.from_string(f"n: {operator} 2", typed=declared)
        worker = Resources.from_string(f"n = {int(worker_value)}", typed=declared)
        if worker_value in holds_for:
            assert task.match(worker) == STRONG
        else:
            with pytest.raises(NoMatch):
                task.match(worker)


@pytest.mark.parametrize(
    ("text", "value_type", "want"),
    [
        ("1 GiB", ValueType.MEMORY, 1024**3),
        ("1GiB", ValueType.MEMORY, 1024**3),
        ("1.5 MiB", ValueType.MEMORY, 1.5 * 1024**2),
        ("2 KiB", ValueType.MEMORY, 2048),
        ("1 TiB", ValueType.MEMORY, 1024**4),
        ("2G", ValueType.MEMORY, 2 * 1024**3),
        ("2g", ValueType.MEMORY, 2 * 1000**3),
        ("2147483648", ValueType.MEMORY, 2147483648),
        ("1:30:00", ValueType.TIME, 5400),
        ("0x10", ValueType.INT, 16),
        ("1e3", ValueType.DOUBLE, 1000),
    ],
    ids=lambda value: str(value),
)
def test_quantities(text: str, value_type: ValueType, want: float) -> None:
    assert parse_quantity(text, value_type) == want


def test_typed_items_parse() -> None:
    # A bare number is a stated value, like "= 2G".
    group = typed("ram: >= 1 GiB, ?< 4G, 2G").get("ram")
    assert isinstance(group, ValueGroup)
    assert group.items == (
        Comparison(">=", 1024**3),
        Comparison("<", 4 * 1024**3, required=False),
        Comparison("=", 2 * 1024**3),
    )
    assert group.value == 2 * 1024**3
    assert [item.optional for item in group.items] == [False, True, False]
    assert not any(item.excluded for item in group.items)


@pytest.mark.parametrize(
    ("text", "error", "position"),
    [
        pytest.param("ram: ~1G", ComparisonSyntaxError, 5, id="excluded-comparison"),
        pytest.param("ram: >=", ComparisonSyntaxError, 7, id="no-number"),
        pytest.param("ram: ?= 1G", ComparisonSyntaxError, 5, id="optional-value"),
        pytest.param("ram >= 1 XiB", ComparisonSyntaxError, 8, id="bad-unit"),
        pytest.param("ram >= lots", ComparisonSyntaxError, 7, id="not-a-number"),
        pytest.param("ram: = 1G, = 2G", ConflictingValuesError, 11, id="two-values"),
        pytest.param("ram: >= 1  GiB", ComparisonSyntaxError, 11, id="two-blanks-before-unit"),
    ],
)
def test_typed_errors(text: str, error: type[TagsError], position: int) -> None:
    with pytest.raises(error) as caught:
        typed(text)
    assert isinstance(caught.value, ValueError)
    assert caught.value.position == position


def test_binary_units_only_for_memory() -> None:
    with pytest.raises(ComparisonSyntaxError, match="binary unit"):
        Resources.from_string("t: < 1 GiB", typed={"t": "time"})


def test_unknown_type_suggests_nearest() -> None:
    with pytest.raises(UnknownValueTypeError, match="did you mean 'memory'"):
        Resources.from_string("ram = 1", typed={"ram": "memroy"})
    assert Resources.from_string("n = 1", typed={"n": ValueType.INT}) == Resources.from_string(
        "n = 1", typed={"n": "INT"}
    )


def test_kind_mismatch_is_an_error() -> None:
    with pytest.raises(GroupKindMismatchError):
        typed("ram >= 1G").match(Resources.from_string("ram = 2G"))
    with pytest.raises(GroupKindMismatchError):
        Resources.from_string("ram: x").match(typed("ram = 2G"))
    with pytest.raises(GroupKindMismatchError):
        typed("n = 1", {"n": "int"}).match(typed("n = 1", {"n": "double"}))
    with pytest.raises(GroupKindMismatchError):
        Resources.union(typed("ram = 1G"), Resources.from_string("ram: x"))
    # An empty tag group on the other side counts as absent.
    assert typed("ram: ?>= 1G").match(Resources.from_string("ram:")) == NEUTRAL


def test_undeclared_groups_keep_tag_semantics() -> None:
    plain = Resources.from_string("ram >= 1 GiB; memory < 1 GiB")
    assert list(plain.as_tuples()) == [("ram", (">= 1 GiB",)), ("memory", ("< 1 GiB",))]
    mixed = typed("ram >= 1 GiB; memory < 1 GiB")
    assert list(mixed.as_tuples())[1] == ("memory", ("< 1 GiB",))


def test_from_dict_union_difference_typed() -> None:
    from_dict = Resources.from_dict({"ram": ">= 1 GiB"}, typed=RAM)
    assert from_dict == typed("ram: >= 1073741824")
    union = Resources.union(typed("ram >= 1G"), typed("ram: ?< 4G, >= 1G"))
    assert union.get("ram").as_str_tuple() == (">= 1073741824", "?< 4294967296")
    difference = Resources.difference(union, typed("ram >= 1G"))
    assert difference.get("ram").as_str_tuple() == ("?< 4294967296",)
    key_value = Resources.from_key_value("ram", ["= 1G"], typed=RAM)
    assert key_value.get("ram").as_str() == "= 1073741824"


def test_canonical_text_round_trips() -> None:
    resources = typed("ram: ?>= 1.5 GiB, != 0, = INFINITY; lang: java")
    text = resources.as_str()
    assert text == "ram: ?>= 1610612736,!= 0,= INFINITY; lang: java"
    assert typed(text) == resources
    assert hash(typed(text)) == hash(resources)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "?"]),
            st.sampled_from(["<", "<=", "==", "!=", ">=", ">"]),
            st.integers(min_value=0, max_value=2**40),
        ),
        max_size=4,
    ),
    st.one_of(st.none(), st.integers(min_value=0, max_value=2**40)),
)
def test_typed_round_trip_and_match_property(
    conditions: list[tuple[str, str, int]], worker_value: int | None
) -> None:
    text = "ram: " + ", ".join(f"{opt}{op} {number}" for opt, op, number in conditions)
    task = typed(text)
    assert typed(task.as_str()) == task
    worker = typed(f"ram = {worker_value}" if worker_value is not None else "")
    expected: object = NEUTRAL
    met = False
    for opt, op, number in conditions:
        holds = worker_value is not None and Comparison(op, number).holds(worker_value)
        if holds:
            met = True
        elif not opt:
            expected = "NoMatch"
    if expected != "NoMatch" and met:
        expected = STRONG
    try:
        got: object = task.match(worker)
    except NoMatch:
        got = "NoMatch"
    assert got == expected
