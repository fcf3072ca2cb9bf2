"""RFC 22 idsets: every line of vectors/flux/idset.jsonl, plus properties and limits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.idset import (
    IDSET_MAX_ID,
    IdSet,
    IdsetError,
    encode_idset,
    parse_idset,
)
from tests.vectors import FLUX

VECTORS = FLUX


def _lines(name: str, op: str | None = None) -> list[Any]:
    rows = [json.loads(line) for line in (VECTORS / name).read_text().splitlines() if line]
    chosen = [row for row in rows if op is None or row["op"] == op]
    return [
        pytest.param(row, id=f"{name}:{row['op']}:{json.dumps(row['input'])}") for row in chosen
    ]


DECODE = _lines("idset.jsonl", "decode")


@pytest.mark.parametrize("row", DECODE)
def test_vector_decode(row: dict[str, Any]) -> None:
    """idset.jsonl decode lines; `rfc22_strict: error` lines record flux-core leniency
    (empty tokens skipped) that jobmatch does not copy (docs/notations/flux.md)."""
    if row.get("error") or row.get("rfc22_strict") == "error":
        with pytest.raises(IdsetError):
            parse_idset(row["input"])
        return
    ids = parse_idset(row["input"])
    expected = row["expected"]
    assert list(ids) == expected["ids"]
    assert len(ids) == expected["count"]
    assert ids.encode(ranged=False) == expected["encode"]
    assert ids.encode() == expected["encode_ranged"]
    assert ids.encode(brackets=True) == expected["encode_ranged_brackets"]


def test_vector_strict_lines_name_flux_core_leniency() -> None:
    """The three rfc22_strict lines are exactly the empty-token cases."""
    strict = [row.values[0]["input"] for row in DECODE if row.values[0].get("rfc22_strict")]
    assert strict == ["1,,2", ",1", "1,"]


@pytest.mark.parametrize("row", _lines("idset.jsonl", "encode"))
def test_vector_encode(row: dict[str, Any]) -> None:
    source = row["input"]
    ids = parse_idset(source) if isinstance(source, str) else IdSet.from_ids(source)
    assert ids.encode() == row["expected"]
    if not isinstance(source, str):
        assert encode_idset(source) == row["expected"]


@pytest.mark.parametrize("row", _lines("idset.jsonl", "encode_brackets_only"))
def test_vector_encode_brackets_only(row: dict[str, Any]) -> None:
    assert parse_idset(row["input"]).encode(ranged=False, brackets=True) == row["expected"]


SET_OPS = [row for op in ("intersect", "union", "difference") for row in _lines("idset.jsonl", op)]


@pytest.mark.parametrize("row", SET_OPS)
def test_vector_set_operations(row: dict[str, Any]) -> None:
    base = parse_idset(row["input"]["idset"])
    args = [parse_idset(arg) for arg in row["input"]["args"]]
    method = {"intersect": base.intersection, "union": base.union, "difference": base.difference}
    assert str(method[row["op"]](*args)) == row["expected"]


def test_errors_name_position_and_expectation() -> None:
    with pytest.raises(IdsetError) as caught:
        parse_idset("1,5,3")
    assert caught.value.notation == "rfc22-idset"
    assert caught.value.position == 4
    assert "ascending" in str(caught.value.expected)
    with pytest.raises(IdsetError) as leading:
        parse_idset("1,007")
    assert "leading zeros" in leading.value.message and leading.value.position == 2


def test_large_sets_are_not_materialised() -> None:
    """Limit: ids up to 2^31-1 (flux-core); the whole universe is two integers."""
    universe = parse_idset(f"0-{IDSET_MAX_ID}")
    assert len(universe) == IDSET_MAX_ID + 1
    assert IDSET_MAX_ID in universe and -1 not in universe
    assert str(universe - parse_idset("5")) == f"0-4,6-{IDSET_MAX_ID}"
    with pytest.raises(IdsetError):
        universe.encode(ranged=False)  # plain listing would be billions of ids
    with pytest.raises(IdsetError):
        parse_idset("9" * 5000)


def test_operators_and_helpers() -> None:
    a, b = parse_idset("1-5"), parse_idset("4-9")
    assert str(a | b) == "1-9" and str(a & b) == "4-5" and str(a - b) == "1-3"
    assert a.first == 1 and a.last == 5 and IdSet().first is None
    assert parse_idset("2-3").issubset(a) and not b.issubset(a)
    with pytest.raises(IdsetError):
        IdSet(((3, 4), (1, 2)))  # the model refuses unnormalised runs


id_lists = st.lists(st.integers(min_value=0, max_value=5000), max_size=60)


@given(id_lists)
def test_property_round_trip_every_style(ids: list[int]) -> None:
    model = IdSet.from_ids(ids)
    assert list(model) == sorted(set(ids))
    for ranged in (True, False):
        for brackets in (True, False):
            assert parse_idset(model.encode(ranged=ranged, brackets=brackets)) == model


@given(id_lists, id_lists)
def test_property_set_operations_match_python_sets(a: list[int], b: list[int]) -> None:
    x, y = IdSet.from_ids(a), IdSet.from_ids(b)
    assert set(x | y) == set(a) | set(b)
    assert set(x & y) == set(a) & set(b)
    assert set(x - y) == set(a) - set(b)
    assert all((i in x) == (i in set(a)) for i in range(-1, 60))


@given(st.text(alphabet="0123456789,-[] x", max_size=30))
def test_property_only_notation_errors(text: str) -> None:
    try:
        parse_idset(text)
    except NotationError as error:
        assert isinstance(error, IdsetError)
