"""Grid Engine numeric values (docs/notations/gridengine.md#values; vectors/sge/values.jsonl)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.quantities import (
    INFINITY,
    MULTIPLIERS,
    QuantityError,
    ValueType,
    canonical_number,
    format_memory,
    format_number,
    format_time,
    is_infinity,
    parse_number,
)
from tests.support.thoroughness import examples
from tests.vectors import SGE, sge_rows

VECTORS = SGE
NUMERIC = [ValueType.INT, ValueType.DOUBLE, ValueType.MEMORY, ValueType.TIME, ValueType.BOOL]


# values.jsonl lines about the numeric parser itself; the string types, the stored TIME
# text and "-l name" without value are tested in gridengine/test_requests.py.
NUMBER_CONTEXTS = {"request", "consumable_request", "consumable_capacity", "complex_value"}
NUMBER_VECTORS = [
    pytest.param(row, id=f"values.jsonl:{number}:{row['type']}:{row['context']}:{row['input']!r}")
    for number, row in sge_rows("values.jsonl")
    if ValueType[row["type"]].is_numeric and row["context"] in NUMBER_CONTEXTS
]


def _expected_value(row: dict[str, Any]) -> float:
    return INFINITY if row["value"] == "INFINITY" else float(row["value"])


@pytest.mark.parametrize("row", NUMBER_VECTORS)
def test_values_vector(row: dict[str, Any]) -> None:
    value_type = ValueType[row["type"]]
    consumable = row["context"].startswith("consumable")
    if row["ok"]:
        assert parse_number(row["input"], value_type, consumable=consumable) == _expected_value(row)
    else:
        with pytest.raises(QuantityError) as caught:
            parse_number(row["input"], value_type, consumable=consumable)
        assert row["error"] in str(caught.value)
        assert caught.value.position is not None


def test_values_vector_numeric_lines_all_covered() -> None:
    numeric_lines = [r for _, r in sge_rows("values.jsonl") if ValueType[r["type"]].is_numeric]
    special = [r for r in numeric_lines if r["context"] not in NUMBER_CONTEXTS]
    assert len(NUMBER_VECTORS) + len(special) == len(numeric_lines)
    assert {r["context"] for r in special} == {"stored_string", "request_without_value"}


# --- the rules of sge_types(1) values, one by one ------------------------------------------


@pytest.mark.parametrize("value_type", NUMERIC, ids=lambda t: t.value)
def test_sge_md_b_one_parser_for_every_numeric_type(value_type: ValueType) -> None:
    assert parse_number("1:00:00", value_type) == 3600
    assert parse_number("2K", value_type) == 2048
    assert parse_number("FaLsE", value_type) == 0
    assert parse_number("InFiNiTy", value_type) == INFINITY


@pytest.mark.parametrize(
    ("text", "value"),
    [("0x1f", 31), ("0X1F", 31), ("00", 0), ("0777", 511), ("0x10k", 16000), ("07M", 7 << 20)],
)
def test_sge_md_b_rule5_c_integer_base_detection(text: str, value: float) -> None:
    assert parse_number(text, ValueType.INT) == value


@pytest.mark.parametrize(("text", "position"), [("08", 1), ("09", 1), ("0778", 3)])
def test_sge_md_b_rule5_octal_errors_name_the_digit(text: str, position: int) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_number(text, ValueType.INT)
    assert caught.value.position == position
    assert "not an octal digit" in caught.value.message
    assert "integer value" in caught.value.message


@pytest.mark.parametrize(("text", "value"), [("08.5", 8.5), ("0.5K", 512), ("-010", -10)])
def test_sge_md_b_rule4_dot_or_no_leading_zero_is_decimal(text: str, value: float) -> None:
    assert parse_number(text, ValueType.DOUBLE) == value


@pytest.mark.parametrize("text", ["0e3", "0x", "1e", "1e+", "--1", "+-1", "1k1", "1KK", ".", "e3"])
def test_sge_md_b_malformed_numbers(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_number(text, ValueType.DOUBLE)
    assert "double value" in caught.value.message


@pytest.mark.parametrize(
    ("text", "position", "expected_fragment"),
    [
        ("12x", 2, "multiplier"),
        ("1kb", 2, "only one multiplier"),
        ("", 0, "a memory value"),
        ("   ", 3, "a memory value"),
        ("1:2", 3, "':'"),
        ("1:2:3:4", 5, "exactly three fields"),
        ("1:00:00x", 7, "end of value"),
        ("1x:0:0", 1, "':'"),
    ],
)
def test_error_position_and_expectation(text: str, position: int, expected_fragment: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_number(text, ValueType.MEMORY)
    error = caught.value
    assert error.notation == "sge-value"
    assert error.position == position
    assert error.expected is not None and expected_fragment in error.expected
    assert error.text == text


@pytest.mark.parametrize(
    ("text", "value"),
    [(" 1:0:0", 3600), ("1: 30:0", 5400), ("1e1:0:0", 36000), ("::30", 30), ("1:00:", 3600)],
)
def test_sge_md_b_rule3_time_fields_are_strtod_decimals(text: str, value: float) -> None:
    assert parse_number(text, ValueType.TIME) == value


def test_sge_md_b_soge_tera_multipliers_only_on_request() -> None:
    with pytest.raises(QuantityError):
        parse_number("1T", ValueType.MEMORY)
    assert parse_number("1T", ValueType.MEMORY, soge=True) == 1024**4
    assert parse_number("1t", ValueType.MEMORY, soge=True) == 1000**4


def test_overflow_is_an_error_not_infinity() -> None:
    with pytest.raises(QuantityError, match="out of range"):
        parse_number("1e308G", ValueType.MEMORY)


@pytest.mark.parametrize("text", ["nan", "inf", "0x1p3", "1,5", "1_000"])
def test_strtod_extensions_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_number(text, ValueType.DOUBLE)


@pytest.mark.parametrize("value_type", [ValueType.STRING, ValueType.HOST], ids=str)
def test_string_types_have_no_numbers(value_type: ValueType) -> None:
    with pytest.raises(QuantityError, match="no numeric values"):
        parse_number("1", value_type)


def test_consumable_rules_name_the_problem() -> None:
    assert parse_number("0", ValueType.MEMORY, consumable=True) == 0
    with pytest.raises(QuantityError, match="infinity not allowed for consumables"):
        parse_number("INFINITY", ValueType.TIME, consumable=True)
    with pytest.raises(QuantityError, match="negative value for consumable"):
        parse_number("0:0:-1", ValueType.TIME, consumable=True)


def test_errors_belong_to_the_notation_family() -> None:
    assert issubclass(QuantityError, NotationError)
    assert QuantityError.__doc__


def test_value_type_parse() -> None:
    assert ValueType.parse("memory") is ValueType.MEMORY
    with pytest.raises(QuantityError, match="unknown complex type 'MEM'"):
        ValueType.parse("MEM")


# --- formatting ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2 * 1024**3, "2.000G"),
        (512 * 1024**2, "512.000M"),
        (1536, "1.500K"),
        (1000, "1000.000"),
        (1.5 * 1024**3, "1.500G"),
        (-(1024**3), "-1.000G"),
        (INFINITY, "INFINITY"),
    ],
)
def test_sge_md_b_memory_printed_as_percent_3f_and_unit(value: float, text: str) -> None:
    assert format_memory(value) == text
    assert format_number(value, ValueType.MEMORY) == text


@pytest.mark.parametrize(
    ("value", "text", "with_days"),
    [
        (5400, "01:30:00", "01:30:00"),
        (59.9, "00:00:59", "00:00:59"),
        (172800, "48:00:00", "2:00:00:00"),
        (90061, "25:01:01", "1:01:01:01"),
        (-1800, "-1800", "-1800"),
        (INFINITY, "INFINITY", "INFINITY"),
    ],
)
def test_sge_md_b_time_printed_as_hh_mm_ss(value: float, text: str, with_days: str) -> None:
    assert format_number(value, ValueType.TIME) == text
    assert format_time(value, days=True) == with_days


@pytest.mark.parametrize(
    ("value", "value_type", "text"),
    [
        (1, ValueType.BOOL, "TRUE"),
        (0, ValueType.BOOL, "FALSE"),
        (2, ValueType.BOOL, "2"),
        (10, ValueType.INT, "10"),
        (1.5, ValueType.INT, "1.5"),
        (0.001, ValueType.DOUBLE, "0.001"),
        (-2.5, ValueType.DOUBLE, "-2.5"),
        (1e-5, ValueType.DOUBLE, "1e-05"),
    ],
)
def test_format_other_types(value: float, value_type: ValueType, text: str) -> None:
    assert format_number(value, value_type) == text
    assert parse_number(text, value_type) == value


def test_canonical_number_rejects_nan() -> None:
    with pytest.raises(QuantityError):
        canonical_number(math.nan, ValueType.DOUBLE)


# --- properties ----------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
numeric_types = st.sampled_from(NUMERIC)
number_like = st.text(alphabet="0123456789.+-eExX:kKmMgGtTaf trueINFYinfy", max_size=16)


@settings(max_examples=examples(400))
@given(text=st.one_of(st.text(max_size=20), number_like), value_type=numeric_types)
def test_property_any_text_parses_or_raises_quantity_error(
    text: str, value_type: ValueType
) -> None:
    try:
        value = parse_number(text, value_type)
    except QuantityError as error:
        assert error.position is not None and 0 <= error.position <= len(text)
    else:
        assert not math.isnan(value) and not math.isinf(value)


@settings(max_examples=examples(300))
@given(value=st.one_of(finite, st.integers(-(2**70), 2**70).map(float)), value_type=numeric_types)
def test_property_canonical_number_round_trips_exactly(value: float, value_type: ValueType) -> None:
    assert parse_number(canonical_number(value, value_type), value_type) == value


@settings(max_examples=examples(300))
@given(value=st.floats(min_value=-1e15, max_value=1e15, allow_nan=False))
def test_property_memory_format_round_trips_within_print_precision(value: float) -> None:
    text = format_memory(value)
    back = parse_number(text, ValueType.MEMORY)
    unit = next((MULTIPLIERS[u] for u in text[-1:] if u in MULTIPLIERS), 1)
    assert abs(back - value) <= 0.0005 * unit + 1e-9 * abs(value)
    assert format_memory(back) == text


@settings(max_examples=examples(300))
@given(value=st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_property_time_format_round_trips_to_whole_seconds(value: float) -> None:
    assert parse_number(format_time(value), ValueType.TIME) == int(value)


@settings(max_examples=examples(200))
@given(value=st.integers(min_value=-(10**9), max_value=10**9))
def test_property_negative_and_positive_whole_times_round_trip(value: int) -> None:
    assert parse_number(format_number(value, ValueType.TIME), ValueType.TIME) == value


def test_is_infinity() -> None:
    assert is_infinity(INFINITY) and is_infinity(math.inf) and not is_infinity(1e300)
