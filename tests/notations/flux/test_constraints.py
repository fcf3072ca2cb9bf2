"""RFC 31 constraints: every line of vectors/flux/constraint.jsonl, the tree, limits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.constraints import (
    MAX_DEPTH,
    And,
    ConstraintError,
    Hosts,
    Not,
    Or,
    Properties,
    Ranks,
    Target,
    constraint_to_json,
    evaluate,
    matches,
    parse_constraint,
)
from app.notations.flux.hostlist import parse_hostlist
from app.notations.flux.idset import parse_idset
from app.notations.flux.requires import compile_requires
from tests.vectors import FLUX

VECTORS = FLUX


def _lines(op: str) -> list[Any]:
    rows = [json.loads(line) for line in (VECTORS / "constraint.jsonl").read_text().splitlines()]
    return [
        pytest.param(row, id=f"constraint.jsonl:{op}:{json.dumps(row['input']['constraint'])}")
        for row in rows
        if row["op"] == op
    ]


def _target(node: dict[str, Any]) -> Target:
    return Target(node.get("hostname"), node.get("rank"), frozenset(node.get("properties", ())))


@pytest.mark.parametrize("row", _lines("match"))
def test_vector_match(row: dict[str, Any]) -> None:
    """Where a line records `fluxion_actual`, jobmatch follows `expected` (RFC 31/flux-core)."""
    target = _target(row["input"]["node"])
    assert evaluate(row["input"]["constraint"], target) is row["expected"]


def test_vector_fluxion_differences_are_named() -> None:
    """constraint.jsonl fluxion_actual lines: (1) Fluxion does not match a property against the
    hostname - reproducible with hostname_is_property=False; (2) Fluxion's `{"or": []}` is
    false, contradicting RFC 31 - jobmatch keeps RFC 31's true."""
    node = Target("foo0", 0, frozenset({"xx", "yy"}))
    assert evaluate({"properties": ["foo0"]}, node) is True
    assert evaluate({"properties": ["foo0"]}, node, hostname_is_property=False) is False
    assert evaluate({"or": []}, node) is True
    fluxion_lines = [row.values[0] for row in _lines("match") if "fluxion_actual" in row.values[0]]
    assert [line["input"]["constraint"] for line in fluxion_lines] == [
        {"or": []},
        {"properties": ["foo0"]},
    ]


@pytest.mark.parametrize("row", _lines("match_set"))
def test_vector_match_set(row: dict[str, Any]) -> None:
    constraint = parse_constraint(row["input"]["constraint"])
    nodes = [_target(node) for node in row["input"]["nodes"]]
    chosen = [node for node in nodes if matches(constraint, node)]
    if "matching_hosts" in row["expected"]:
        assert [node.hostname for node in chosen] == row["expected"]["matching_hosts"]
    else:
        assert [node.rank for node in chosen] == row["expected"]["matching_ranks"]
    if "requires" in row["input"]:  # t2276: the --requires text compiles to this constraint
        assert compile_requires(row["input"]["requires"]) == row["input"]["constraint"]


@pytest.mark.parametrize("row", _lines("validate"))
def test_vector_validate(row: dict[str, Any]) -> None:
    """`a^b` records flux-core accepting it (`flux_core_actual`); jobmatch follows `expected`
    (Fluxion's rule: `^` only as the first character)."""
    value = row["input"]["constraint"]
    if row.get("error"):
        with pytest.raises(ConstraintError) as caught:
            parse_constraint(value)
        if "error_message" in row:
            assert row["error_message"] in str(caught.value)
    else:
        assert row["expected"] == "valid"
        tree = parse_constraint(value)
        assert parse_constraint(constraint_to_json(tree)) == tree


def test_typed_tree_is_normalised() -> None:
    tree = parse_constraint(
        {
            "and": [
                {"and": [{"hostlist": ["host[0-1]", "login"]}, {"properties": ["ssd", "^slow"]}]},
                {"ranks": ["0-3", "8"]},
                {"not": [{"properties": ["a"]}, {"properties": ["b"]}]},
                {"not": []},
            ]
        }
    )
    assert tree == And(
        (
            Hosts((parse_hostlist("host[0-1]"), parse_hostlist("login"))),
            Properties(frozenset({"ssd"}), frozenset({"slow"})),
            Ranks(parse_idset("0-3,8")),
            Not(And((Properties(frozenset({"a"})), Properties(frozenset({"b"}))))),
            Not(And()),
        )
    )
    assert isinstance(tree, And) and isinstance(tree.terms[0], Hosts)
    assert tree.terms[0].names() == frozenset({"host0", "host1", "login"})
    assert parse_constraint({}) == And() and parse_constraint({"or": []}) == Or()


def test_limits_depth_and_messages() -> None:
    deep: dict[str, Any] = {"properties": ["a"]}
    for _ in range(MAX_DEPTH + 1):
        deep = {"not": [deep]}
    with pytest.raises(ConstraintError, match="deeper"):
        parse_constraint(deep)
    with pytest.raises(ConstraintError, match="did you mean 'hostlist'"):
        parse_constraint({"hostlists": ["a"]})
    with pytest.raises(ConstraintError) as caught:
        parse_constraint({"hostlist": ["host[0-999999999999]"]})
    assert caught.value.notation == "rfc31-constraint"
    with pytest.raises(ConstraintError):
        parse_constraint({"properties": ["^"]})
    with pytest.raises(ConstraintError):
        parse_constraint({"ranks": [0]})


leaf = st.one_of(
    st.builds(
        lambda p: {"properties": p}, st.lists(st.sampled_from(["a", "b", "^a", "^c"]), max_size=3)
    ),
    st.builds(lambda h: {"hostlist": [h]}, st.sampled_from(["n[0-3]", "n1", "m[1-2]"])),
    st.builds(lambda r: {"ranks": [r]}, st.sampled_from(["0", "1-3", "0,2"])),
)
constraints = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"and": xs}, st.lists(inner, max_size=3)),
        st.builds(lambda xs: {"or": xs}, st.lists(inner, max_size=3)),
        st.builds(lambda x: {"not": [x]}, inner),
    ),
    max_leaves=8,
)


def _reference(value: dict[str, Any], node: Target) -> bool:
    """A direct reading of RFC 31 on the raw JSON, to check the typed tree against."""
    if not value:
        return True
    ((op, args),) = value.items()
    if op == "and":
        return all(_reference(a, node) for a in args)
    if op == "or":
        return not args or any(_reference(a, node) for a in args)
    if op == "not":
        return not all(_reference(a, node) for a in args)
    if op == "properties":
        have = node.properties | {node.hostname}
        return all((p[1:] not in have) if p.startswith("^") else (p in have) for p in args)
    if op == "hostlist":
        return any(node.hostname in parse_hostlist(h).expand() for h in args)
    return any(node.rank in set(parse_idset(r)) for r in args)


@given(constraints, st.integers(0, 4), st.frozensets(st.sampled_from(["a", "b", "c"])))
def test_property_tree_matches_reference_and_round_trips(
    value: dict[str, Any], rank: int, props: frozenset[str]
) -> None:
    tree = parse_constraint(value)
    assert parse_constraint(constraint_to_json(tree)) == tree
    for hostname in (f"n{rank}", f"m{rank}"):
        node = Target(hostname, rank, props)
        assert matches(tree, node) is _reference(value, node)


@given(
    st.recursive(
        st.none() | st.text(max_size=3) | st.integers(),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(["and", "or", "not", "properties", "ranks", "x"]), c, max_size=2
            )
        ),
        max_leaves=6,
    )
)
def test_property_only_notation_errors(value: object) -> None:
    try:
        parse_constraint(value)
    except NotationError as error:
        assert isinstance(error, ConstraintError)
