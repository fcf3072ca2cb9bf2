"""RFC 45 range strings and RFC 14 counts: every line of vectors/flux/range.jsonl."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.ranges import (
    COUNT_MAX,
    IdsetCount,
    RangeCount,
    RangeError,
    count_kind,
    count_to_json,
    count_values,
    parse_count_string,
    parse_range,
    range_from_dict,
    validate_count,
)
from tests.vectors import FLUX

VECTORS = FLUX

#: range.jsonl dict lines with `operand` but no `operator` that expect success. RFC 14 prose
#: (followed) requires the two together, as the vectors' own resource_count_missing_operator
#: line says; this expectation is flux-core C count_create's and holds with
#: allow_unpaired_operand=True.
UNPAIRED_OPERAND_LINES = [{"min": 2, "max": 5, "operand": 3}]


def _lines(op: str) -> list[Any]:
    rows = [json.loads(line) for line in (VECTORS / "range.jsonl").read_text().splitlines()]
    return [
        pytest.param(row, id=f"range.jsonl:{op}:{json.dumps(row['input'])}")
        for row in rows
        if row["op"] == op
    ]


@pytest.mark.parametrize("row", _lines("parse"))
def test_vector_parse(row: dict[str, Any]) -> None:
    """Conventions C1/C2 (dict form), C3 (idset text kept), C4 (a-b is a range, [N] is N)."""
    text = row["input"]
    if row.get("error"):
        with pytest.raises(RangeError):
            parse_count_string(text)
        return
    expected = row["expected"]
    count = parse_count_string(text)
    assert count_kind(text) == expected["kind"]
    if expected["kind"] == "integer":
        assert count == expected["value"]
        return
    if expected["kind"] == "idset":
        assert isinstance(count, IdsetCount)
        assert count_to_json(count) == expected["string"]
        assert list(count.values()) == expected["values"]
        if "short" in expected:
            assert count.ids.encode() == expected["short"]
        return
    assert isinstance(count, RangeCount)
    assert count.as_dict() == expected["dict"]
    assert count_to_json(count) == expected["dict"]
    for form, value in (
        ("long", count.long()),
        ("short", count.short()),
        ("short_brackets", count.short(brackets=True)),
    ):
        if form in expected:
            assert value == expected[form], form
    if "values" in expected:
        assert list(count.values()) == expected["values"]
    if "values_first" in expected:
        first = list(itertools.islice(count.values(), len(expected["values_first"])))
        assert first == expected["values_first"]
    if count.min == count.max:
        # flux-core writes min == max as the plain integer, which reads back as that integer.
        assert parse_count_string(count.long()) == count.min == parse_count_string(count.short())
    else:
        assert parse_range(count.long()) == count == parse_range(count.short())


@pytest.mark.parametrize("row", _lines("dict"))
def test_vector_dict(row: dict[str, Any]) -> None:
    value = row["input"]
    if row.get("error"):
        with pytest.raises(RangeError):
            range_from_dict(value)
        return
    expected = row["expected"]
    if value in UNPAIRED_OPERAND_LINES:
        with pytest.raises(RangeError, match="operand without operator"):
            range_from_dict(value)
        count = range_from_dict(value, allow_unpaired_operand=True)
    else:
        count = range_from_dict(value)
    assert count.long() == expected["long"]
    assert count.short() == expected["short"]
    if "values" in expected:
        assert list(count.values()) == expected["values"]


def test_vector_unpaired_operand_conflict_is_named() -> None:
    """range.jsonl: {min:2,max:5,operand:3} expects success (flux-core C) while
    {min:1,max:2,operand:1} expects an error (RFC 14 pairing rule). jobmatch follows RFC 14."""
    with pytest.raises(RangeError):
        range_from_dict({"min": 1, "max": 2, "operand": 1})
    assert (
        range_from_dict({"min": 1, "max": 2, "operand": 1}, allow_unpaired_operand=True).long()
        == "1-2:1:+"
    )


@pytest.mark.parametrize("row", _lines("count_value"))
def test_vector_count_value(row: dict[str, Any]) -> None:
    if row.get("error"):
        with pytest.raises(RangeError):
            validate_count(row["input"])
    else:
        assert row["expected"] == "valid"
        validate_count(row["input"])


def test_convention_c2_never_infinity() -> None:
    """C2: open ranges with a non-default step keep operator/operand, never `max: Infinity`."""
    assert parse_range("3+:2").as_dict() == {"min": 3, "operator": "+", "operand": 2}
    assert "Infinity" not in json.dumps(parse_range("3+:2:*").as_dict())


def test_largest_acceptable_value() -> None:
    """RFC 14: a range allocates the largest acceptable value available."""
    assert parse_range("2-256:2:^").largest(100) == 16
    assert parse_range("1-30:4").largest(12) == 9
    assert parse_range("4+").largest(3) is None
    assert parse_count_string("4,9,16,25").largest(20) == 16  # type: ignore[union-attr]
    assert 9 in parse_range("1-30:4") and 10 not in parse_range("1-30:4")
    assert list(count_values(7)) == [7]


def test_errors_are_specific() -> None:
    with pytest.raises(RangeError) as caught:
        parse_count_string("2-8:1:*")
    assert caught.value.notation == "rfc45-range" and "operand >= 2" in str(caught.value)
    with pytest.raises(RangeError, match="did you mean"):
        range_from_dict({"min": 1, "mx": 3})
    with pytest.raises(RangeError):
        validate_count(True)
    with pytest.raises(RangeError):
        parse_count_string("9" * 5000)  # bounded: no giant integers


def test_exponent_growth_is_bounded() -> None:
    assert list(parse_range("2+:64:^").values()) == [2]
    assert list(parse_range("2+:2:^").values()) == [2, 4, 16, 256, 65536, 2**32]
    assert all(v <= COUNT_MAX for v in parse_range("3+:3:*").values())


ranges = st.builds(
    lambda lo, span, k, op, open_: (
        lo + (1 if op == "^" else 0),
        span,
        k + (1 if op != "+" else 0),
        op,
        open_,
    ),
    st.integers(1, 50),
    st.integers(0, 200),
    st.integers(1, 5),
    st.sampled_from(["+", "*", "^"]),
    st.booleans(),
)


@given(ranges)
def test_property_string_and_dict_round_trip(spec: tuple[int, int, int, str, bool]) -> None:
    lo, span, k, op, open_ = spec
    count = RangeCount(lo, None if open_ else lo + span, op, k)  # type: ignore[arg-type]
    if count.min == count.max:
        assert parse_count_string(count.long()) == count.min
    else:
        assert parse_range(count.long()) == count
        assert parse_range(count.short(brackets=True)) == count
    assert range_from_dict(count.as_dict()) == count
    values = list(itertools.islice(count.values(), 50))
    assert values == sorted(set(values)) and all(v in count for v in values)


@given(st.text(alphabet="0123456789-+:*^[],x ", max_size=20))
def test_property_only_notation_errors(text: str) -> None:
    try:
        parse_count_string(text)
    except NotationError as error:
        assert isinstance(error, RangeError)
