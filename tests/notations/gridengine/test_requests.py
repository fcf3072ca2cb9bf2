"""``-l`` request lists (qsub(1), docs/notations/gridengine.md#requests--l; the string, stored
and value-less lines of vectors/sge/values.jsonl)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.notations.gridengine.attribute_table import ComplexTable, default_table
from app.notations.gridengine.definitions import ComplexDefinition
from app.notations.gridengine.requests import (
    Request,
    RequestError,
    RequestList,
    build_request,
    parse_request_list,
    requests_from_pairs,
)
from app.notations.quantities import ValueType
from tests.support.thoroughness import examples
from tests.vectors import SGE, sge_rows

VECTORS = SGE
TABLE = default_table()


def _table_with(*lines: str) -> ComplexTable:
    extra = tuple(ComplexDefinition.from_line(line) for line in lines)
    return ComplexTable(TABLE.definitions + extra, builtin_names=TABLE.builtin_names)


def _vector_table(value_type: str) -> ComplexTable:
    """A table with one requestable attribute ``x`` of the vector's type."""
    relop = "==" if value_type in ("BOOL", "STRING", "CSTRING", "RESTRING", "HOST") else "<="
    default = "0" if ValueType[value_type].is_numeric else "NONE"
    return ComplexTable(
        (ComplexDefinition.from_line(f"x x {value_type} {relop} YES NO {default} 0"),)
    )


REQUEST_VECTORS = [
    pytest.param(row, id=f"values.jsonl:{n}:{row['type']}:{row['context']}:{row['input']!r}")
    for n, row in sge_rows("values.jsonl")
    if not ValueType[row["type"]].is_numeric
    or row["context"] in ("stored_string", "request_without_value")
]


@pytest.mark.parametrize("row", REQUEST_VECTORS)
def test_values_vector_request(row: dict[str, Any]) -> None:
    table = _vector_table(row["type"])
    resolver = {"node01": "node01.example.org"}.get
    if not row["ok"]:
        with pytest.raises(RequestError) as caught:
            build_request(table, "x", row["input"], resolve_host=resolver)
        assert row["error"] in caught.value.message
        return
    request = build_request(table, "x", row["input"], resolve_host=resolver)
    if row["type"] == "HOST":
        # "<canonical name of node01>": whatever the resolver says is canonical.
        assert row["value"] == "<canonical name of node01>"
        assert request.value == request.parsed == "node01.example.org"
    elif ValueType[row["type"]].is_string:
        assert request.parsed == row["value"] and request.value == row["input"]
    else:
        assert request.parsed == row["value"]
    if "normalized_string" in row:
        assert request.value == row["normalized_string"]


# --- submission checks (gridengine.md) ---------------------------------------------------------


def test_parse_list_resolves_shortcuts_and_normalises() -> None:
    requests = parse_request_list("h_vmem=2G,a=lx* h_rt=1:30:00, mf=1024M", TABLE)
    assert requests.to_text() == "h_vmem=2G,arch=lx*,h_rt=5400,mem_free=1024M"
    assert requests.category_text() == "arch=lx*,h_rt=5400,h_vmem=2G,mem_free=1024M"
    assert requests.get("mem_free") == Request("mem_free", "1024M", 1024.0**3)
    assert len(requests) == 4 and next(iter(requests)).name == "h_vmem"


def test_bool_shorthand_is_true() -> None:
    table = _table_with("gpu gpu BOOL == YES NO 0 0")
    assert parse_request_list("gpu", table).to_text() == "gpu=TRUE"
    assert parse_request_list("dwg,gpu=false", table).to_text() == "display_win_gui=TRUE,gpu=false"


def test_later_request_replaces_earlier() -> None:
    requests = parse_request_list("h_vmem=1G,arch=lx*,h_vmem=2G", TABLE)
    assert requests.to_text() == "h_vmem=2G,arch=lx*"


def test_empty_list() -> None:
    assert parse_request_list("  ", TABLE) == RequestList(())
    assert parse_request_list("", TABLE, soft=True).category_text() == "NONE"


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("h_vmem=2G,arch_=lx", 10, "unknown resource 'arch_', did you mean 'arch'?"),
        ("la=1", 0, "'load_avg' is configured as non requestable"),
        ("tmp=/tmp", 0, "non requestable"),
        ("slots=4", 0, "slots cannot be requested with -l"),
        ("s=4", 0, "slots cannot be requested with -l"),
        ("h_vmem", 6, "missing value"),
        ("h_rt=1:00", 9, "invalid time value"),
        ("h_vmem=2X", 8, "invalid memory value"),
        ("arch=lx*|", 9, "malformed string expression"),
        ("arch=(lx*", 9, "malformed string expression"),
        ("q=all.q@node1", 7, "qname requests may not contain '@'"),
        ("a=1,,b=2", 4, "empty request item"),
        (",a=1", 0, "empty request item"),
        ("a=1,", 4, "ends with a comma"),
        ("=1", 0, "without attribute name"),
    ],
)
def test_sge_md_c_submission_errors(text: str, position: int, message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request_list(text, TABLE)
    assert caught.value.notation == "sge-request"
    assert message in caught.value.message
    assert caught.value.position == position
    assert caught.value.expected


def test_sge_md_c_consumables_no_infinity_no_negative_no_soft() -> None:
    table = _table_with("lic lic INT <= YES YES 0 0")
    assert parse_request_list("lic=2", table).get("lic") == Request("lic", "2", 2.0)
    with pytest.raises(RequestError, match="infinity not allowed for consumables"):
        parse_request_list("lic=INFINITY", table)
    with pytest.raises(RequestError, match="negative value for consumable"):
        parse_request_list("lic=-1", table)
    with pytest.raises(RequestError, match="soft requests on consumables are not supported"):
        parse_request_list("lic=1", table, soft=True)


def test_sge_md_c_soft_string_expressions_not_syntax_checked() -> None:
    soft = parse_request_list("arch=lx*|", TABLE, soft=True)
    assert soft.soft and soft.get("arch") == Request("arch", "lx*|", "lx*|")


def test_sge60_semantics_does_not_syntax_check_expressions() -> None:
    assert parse_request_list("arch=[!a]x", TABLE, semantics="6.0").to_text() == "arch=[!a]x"


def test_sge_md_b_host_request_resolution() -> None:
    resolver = {"n1": "n1.example.org"}.get
    assert parse_request_list("h=n1", TABLE, resolve_host=resolver).to_text() == (
        "hostname=n1.example.org"
    )
    assert parse_request_list("h=n*", TABLE, resolve_host=resolver).to_text() == "hostname=n*"
    with pytest.raises(RequestError, match="can't resolve host 'n9'") as caught:
        parse_request_list("arch=x,h=n9", TABLE, resolve_host=resolver)
    assert caught.value.position == 9


def test_requests_from_pairs() -> None:
    table = _table_with("gpu gpu BOOL == YES NO 0 0")
    requests = requests_from_pairs([["h_rt", "0:30:0"], ["gpu", None]], table)
    assert requests.to_text() == "h_rt=1800,gpu=TRUE"
    with pytest.raises(RequestError, match="is not \\[name, value\\]"):
        requests_from_pairs([["h_rt"]], table)


def test_build_request_standalone_positions() -> None:
    with pytest.raises(RequestError) as caught:
        build_request(TABLE, "h_rt", "1:0")
    assert caught.value.position == 5 + 3
    assert caught.value.text == "h_rt=1:0"


# --- properties ----------------------------------------------------------------------------

names = st.sampled_from(["a", "arch", "h_vmem", "mf", "h_rt", "q", "la", "slots", "dwg", "zz"])
values = st.sampled_from(["", "1G", "lx*", "1:00:00", "true", "x|", "-1", "a@b", "0x1F"])
items = st.tuples(names, st.one_of(st.none(), values)).map(
    lambda pair: pair[0] if pair[1] is None else f"{pair[0]}={pair[1]}"
)
lists = st.tuples(st.lists(items, max_size=4), st.sampled_from([",", " ", ", "])).map(
    lambda parts: parts[1].join(parts[0])
)


@settings(max_examples=examples(400))
@given(text=st.one_of(lists, st.text(max_size=20)), soft=st.booleans())
def test_property_lists_parse_and_round_trip_or_raise_request_error(text: str, soft: bool) -> None:
    try:
        requests = parse_request_list(text, TABLE, soft=soft)
    except RequestError as error:
        assert error.position is not None and 0 <= error.position <= len(text)
    else:
        assert parse_request_list(requests.to_text(), TABLE, soft=soft) == requests
