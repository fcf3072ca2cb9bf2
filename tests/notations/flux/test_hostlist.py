"""RFC 29 hostlists: every line of vectors/flux/hostlist.jsonl, plus limits and properties."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.hostlist import (
    MAX_HOSTS,
    Hostlist,
    HostlistError,
    Padding,
    count_hostlist,
    encode_hosts,
    expand_hostlist,
    nth_host,
    parse_hostlist,
)
from tests.vectors import FLUX

VECTORS = FLUX
PADDINGS: tuple[Padding, ...] = ("rfc", "flux-core")

#: Encode lines whose expected text groups different zero-pad widths in one bracket
#: (``foo[08,9]``). That text means foo08,foo09 under RFC 29's first-element padding rule, so
#: in the RFC reading jobmatch must write these lists differently; the expected text is
#: flux-core's and is checked in ``padding="flux-core"``. Values: jobmatch's RFC encoding.
RFC_PADDING_CONFLICTS = {"foo08,foo9": "foo08,foo9", "005,4,11-13": "005,4,11-13"}


def _lines(op: str) -> list[Any]:
    rows = [json.loads(line) for line in (VECTORS / "hostlist.jsonl").read_text().splitlines()]
    return [
        pytest.param(row, id=f"hostlist.jsonl:{op}:{json.dumps(row['input'])}")
        for row in rows
        if row["op"] == op
    ]


@pytest.mark.parametrize("row", _lines("expand"))
def test_vector_expand(row: dict[str, Any]) -> None:
    """`rfc29_strict: error` lines record flux-core sloppiness (multi-bracket expressions,
    `foo[1-]`, `foo[1]]`, `foo[ 1-2]`); jobmatch is strict (docs/notations/flux.md)."""
    text = row["input"]
    if row.get("rfc29_strict") == "error":
        for padding in PADDINGS:
            with pytest.raises(HostlistError):
                expand_hostlist(text, padding=padding)
        return
    assert expand_hostlist(text) == row["expected"]
    flux_core = row.get("flux_core_actual", row["expected"])
    assert expand_hostlist(text, padding="flux-core") == flux_core


def test_vector_rfc29_zero_padding_conflict_is_named() -> None:
    """hostlist.jsonl `[005,4,11-13]`: RFC 29 (followed) pads every id from the first element;
    flux-core pads per element. Both readings are available."""
    assert expand_hostlist("[005,4,11-13]") == ["005", "004", "011", "012", "013"]
    assert expand_hostlist("[005,4,11-13]", padding="flux-core") == ["005", "4", "11", "12", "13"]
    # An element with more zeros than the first keeps them in both readings.
    assert expand_hostlist("foo[1,01]") == ["foo1", "foo01"]


@pytest.mark.parametrize("row", _lines("encode"))
def test_vector_encode(row: dict[str, Any]) -> None:
    text, expected = row["input"], row["expected"]
    hosts = parse_hostlist(text, padding="flux-core")
    assert hosts.encode("flux-core") == expected["encode"]
    if "count" in expected:
        assert len(hosts) == expected["count"]
    rfc = parse_hostlist(text)
    rfc_text = rfc.encode()
    assert rfc_text == RFC_PADDING_CONFLICTS.get(text, expected["encode"])
    assert parse_hostlist(rfc_text) == rfc  # the RFC encoding always reads back


def test_vector_encode_conflicts_are_the_only_ones() -> None:
    """Named difference: only these encode lines depend on flux-core's per-element padding."""
    conflicts = []
    for row in _lines("encode"):
        line = row.values[0]
        if parse_hostlist(line["input"]).encode() != line["expected"]["encode"]:
            conflicts.append(line["input"])
    assert sorted(conflicts) == sorted(RFC_PADDING_CONFLICTS)


@pytest.mark.parametrize("row", _lines("decode"))
def test_vector_decode_errors(row: dict[str, Any]) -> None:
    assert row["error"] is True
    for padding in PADDINGS:
        with pytest.raises(HostlistError):
            parse_hostlist(row["input"], padding=padding)


@pytest.mark.parametrize("row", _lines("count"))
def test_vector_count(row: dict[str, Any]) -> None:
    assert count_hostlist(row["input"]) == row["expected"]


@pytest.mark.parametrize("row", _lines("nth"))
def test_vector_nth(row: dict[str, Any]) -> None:
    assert nth_host(row["input"]["hostlist"], row["input"]["n"]) == row["expected"]


@pytest.mark.parametrize("row", _lines("find"))
def test_vector_find(row: dict[str, Any]) -> None:
    hosts = parse_hostlist(row["input"]["hostlist"])
    assert hosts.find(row["input"]["host"]) == row["expected"]
    assert (row["input"]["host"] in hosts) == (row["expected"] >= 0)


@pytest.mark.parametrize("row", _lines("delete"))
def test_vector_delete(row: dict[str, Any]) -> None:
    hosts = parse_hostlist(row["input"]["hostlist"])
    deleted, rest = hosts.delete(parse_hostlist(row["input"]["delete"]))
    assert deleted == row["expected"]["deleted"]
    assert str(rest) == row["expected"]["result"]


@pytest.mark.parametrize("row", _lines("sort"))
def test_vector_sort(row: dict[str, Any]) -> None:
    assert str(parse_hostlist(row["input"]).sorted()) == row["expected"]


@pytest.mark.parametrize("row", _lines("uniq"))
def test_vector_uniq(row: dict[str, Any]) -> None:
    assert str(parse_hostlist(row["input"]).uniq()) == row["expected"]


@pytest.mark.parametrize("row", _lines("encode_list"))
def test_vector_encode_list(row: dict[str, Any]) -> None:
    assert encode_hosts(row["input"]) == row["expected"]
    assert str(Hostlist.from_hosts(row["input"])) == row["expected"]


@pytest.mark.parametrize("row", _lines("index"))
def test_vector_index(row: dict[str, Any]) -> None:
    hosts = parse_hostlist(row["input"]["hostlist"])
    assert hosts.index(parse_hostlist(row["input"]["hosts"])) == row["expected"]


def test_hundred_thousand_names_stay_lazy_and_fast() -> None:
    """Brief: 100,000-name hostlists are counted, indexed and searched without expansion."""
    text = "node[0-49999],gpu[00000-49999]"
    started = time.perf_counter()
    hosts = parse_hostlist(text)
    assert len(hosts) == 100_000
    assert hosts[75_000] == "gpu25000" and hosts[-1] == "gpu49999"
    assert hosts.find("gpu25000") == 75_000 and hosts.find("gpu5") == -1
    assert str(hosts) == text
    assert time.perf_counter() - started < 1.0
    names = [f"n{i}" for i in range(100_000)]
    assert encode_hosts(names) == "n[0-99999]"
    assert Hostlist.from_hosts(names) == parse_hostlist("n[0-99999]")


@pytest.mark.parametrize(
    "hostile",
    ["host[0-999999999999]", "h[0-" + "9" * 4000 + "]", ",".join(["x[0-1048575]"] * 5)],
)
def test_hostile_inputs_fail_fast(hostile: str) -> None:
    """Limits: 2^20 ids per range (flux-core), 18-digit ids, MAX_HOSTS names per list."""
    started = time.perf_counter()
    with pytest.raises(HostlistError) as caught:
        parse_hostlist(hostile)
    assert caught.value.expected
    assert time.perf_counter() - started < 1.0
    assert MAX_HOSTS == 1 << 22


def test_error_messages_point_at_the_problem() -> None:
    with pytest.raises(HostlistError) as caught:
        parse_hostlist("a,node[1-2]x[3]")
    assert caught.value.notation == "rfc29-hostlist"
    assert caught.value.position == 12
    assert "one bracketed idlist" in str(caught.value.expected)
    with pytest.raises(HostlistError):
        Hostlist.from_hosts(["ok", "bad name"])


def test_separators_and_empty_expressions() -> None:
    """RFC 29: an empty expression is an empty list; flux-core also splits on space/tab."""
    assert expand_hostlist(",a,,b,") == ["a", "b"]
    assert parse_hostlist("a b") == parse_hostlist("a,b")


names = st.lists(
    st.builds(
        lambda prefix, number, pad: prefix + str(number).zfill(pad),
        st.sampled_from(["n", "gpu-", "x1y", ""]),
        st.integers(min_value=0, max_value=30),
        st.integers(min_value=0, max_value=3),
    ),
    max_size=40,
)


@given(names)
def test_property_encode_round_trip_both_paddings(hosts: list[str]) -> None:
    hosts = [h for h in hosts if h]
    for padding in PADDINGS:
        text = encode_hosts(hosts, padding=padding)
        assert expand_hostlist(text, padding=padding) == hosts


@given(names)
def test_property_sort_uniq_nth_find(hosts: list[str]) -> None:
    hosts = [h for h in hosts if h]
    model = Hostlist.from_hosts(hosts)
    assert len(model) == len(hosts)
    assert [model.nth(i) for i in range(len(hosts))] == hosts
    assert all(model.find(h) == hosts.index(h) for h in hosts)
    assert sorted(model.sorted()) == sorted(hosts)
    assert set(model.uniq()) == set(hosts) and len(model.uniq()) == len(set(hosts))


@given(st.text(alphabet="ab0129[]-, \t", max_size=25))
def test_property_only_notation_errors(text: str) -> None:
    try:
        count_hostlist(text)
    except NotationError as error:
        assert isinstance(error, HostlistError)
