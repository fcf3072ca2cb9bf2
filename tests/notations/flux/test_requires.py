"""RFC 35 query text -> RFC 31: every line of vectors/flux/requires.jsonl, plus the preset."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.constraints import (
    ConstraintError,
    Hosts,
    Properties,
    Ranks,
    constraint_to_json,
)
from app.notations.flux.requires import (
    FLUX_REQUIRES,
    MAX_DEPTH,
    QueryParser,
    RequiresError,
    compile_requires,
    compile_requires_constraint,
    format_requires,
    parse_query,
    same_constraint,
)
from tests.vectors import FLUX

VECTORS = FLUX
ROWS = [json.loads(line) for line in (VECTORS / "requires.jsonl").read_text().splitlines()]


def _parser(config: dict[str, Any]) -> QueryParser:
    return QueryParser(
        default_op=config["default_op"],
        aliases=config["aliases"],
        split=config["split"],
        combine=frozenset(config["combine"]),
    )


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(row, id=f"requires.jsonl:{json.dumps(row['input']['query'])}:{index}")
        for index, row in enumerate(ROWS)
    ],
)
def test_vector_query(row: dict[str, Any]) -> None:
    parser = _parser(row["input"]["parser"])
    query = row["input"]["query"]
    if row.get("error"):
        with pytest.raises(RequiresError):
            parse_query(query, parser)
        return
    assert parse_query(query, parser) == row["expected"]
    if parser == FLUX_REQUIRES:
        assert compile_requires(query) == row["expected"]


def test_vector_flux_configuration_matches_preset() -> None:
    """RFC 35 (docs/notations/flux.md): the --requires lines all use exactly the
    FLUX_REQUIRES settings."""
    flux_rows = [r for r in ROWS if r["input"]["parser"]["default_op"] == "properties"]
    assert len(flux_rows) > 50
    assert all(_parser(r["input"]["parser"]) == FLUX_REQUIRES for r in flux_rows)


def test_several_requires_options_are_joined_with_spaces() -> None:
    assert compile_requires(["foo,bar", "^baz"]) == {"properties": ["foo", "bar", "^baz"]}


def test_compile_and_validate() -> None:
    """Semantic errors (unknown operator, bad hostlist/idset) surface in the RFC 31 step."""
    tree = compile_requires_constraint("host:fluke[1-5] rank:0-3 ssd,^slow")
    assert tree.terms[0] == Hosts((tree.terms[0].hostlists[0],))  # type: ignore[union-attr]
    assert isinstance(tree.terms[1], Ranks) and len(tree.terms[1].ids) == 4  # type: ignore[union-attr]
    assert tree.terms[2] == Properties(frozenset({"ssd"}), frozenset({"slow"}))  # type: ignore[union-attr]
    for bad in ("foo:bar", "ranks:1-0", "host:f["):
        with pytest.raises(ConstraintError):
            compile_requires_constraint(bad)


def test_error_positions_and_limits() -> None:
    with pytest.raises(RequiresError) as caught:
        compile_requires("gpu | (ib")
    assert caught.value.notation == "rfc35-requires" and caught.value.position == 6
    with pytest.raises(RequiresError, match="deeper"):
        compile_requires("(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(RequiresError, match="no default"):
        parse_query("bare", QueryParser())
    with pytest.raises(RequiresError, match="empty value"):
        compile_requires("a,,b")


words = st.sampled_from(["a", "b", "gpu", "host:n[1-2]", "rank:0", "'q r'", "-c", "x:1"])
joiners = st.sampled_from([" ", "|", "&", " or ", " and ", " && ", "||"])


@given(st.lists(st.tuples(joiners, words), min_size=1, max_size=6), words)
def test_property_generated_queries_parse(pairs: list[tuple[str, str]], first: str) -> None:
    query = first + "".join(j + w for j, w in pairs)
    result = compile_requires(query)
    assert isinstance(result, dict) and len(result) == 1
    assert compile_requires(f"({query})") == result
    assert compile_requires(f"not ({query})") == {"not": [result]}


@given(st.text(alphabet="ab:|&()-' \"not", max_size=25))
def test_property_only_notation_errors(text: str) -> None:
    try:
        compile_requires(text)
    except NotationError as error:
        assert isinstance(error, RequiresError)


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("gpu&ib | host:node[1-4]", "gpu,ib | host:node[1-4]"),
        ("a|b c", "(a | b) & c"),
        ("not (a|b)", "not (a | b)"),
        ("-host:n1", "not host:n1"),
        ("gpu,ib & (host:node[1-4] | rank:0-3)", "gpu,ib & (host:node[1-4] | rank:0-3)"),
        ("^foo", "^foo"),
        ('properties:"a b"', "properties:'a b'"),
        ("rank:0-3 rank:5", "rank:0-3 & rank:5"),
    ],
)
def test_a_constraint_is_written_back_as_requires_text(query: str, text: str) -> None:
    constraint = compile_requires(query)
    assert format_requires(constraint) == text
    assert compile_requires_constraint(text) == compile_requires_constraint(query)


@pytest.mark.parametrize(
    "constraint",
    [
        {"hostlist": ["a", "b"]},  # one hostlist term holds one entry in RFC 35 text
        {"properties": []},  # no term says "nothing"
        {"properties": ['it\'s "both"']},  # no quote encloses both quotes
    ],
)
def test_a_constraint_without_requires_text_has_none(constraint: dict[str, object]) -> None:
    assert format_requires(constraint) is None


def test_an_invalid_constraint_has_no_requires_text() -> None:
    assert format_requires({"nonsense": ["x"]}) is None


valid_words = st.sampled_from(
    ["a", "b", "gpu", "^ssd", "host:n[1-2]", "rank:0-3", "'q r'", "-c", "-host:x", "a,b"]
)


@given(st.lists(st.tuples(joiners, valid_words), min_size=0, max_size=6), valid_words)
def test_property_written_text_compiles_to_the_same_constraint(
    pairs: list[tuple[str, str]], first: str
) -> None:
    """Whatever valid query a person typed, the text written back from its constraint
    (when there is one) compiles to the same constraint."""
    query = first + "".join(j + w for j, w in pairs)
    constraint = compile_requires_constraint(query)
    text = format_requires(compile_requires(query))
    assert text is not None, query
    again = compile_requires_constraint(text)
    assert same_constraint(constraint_to_json(again), constraint_to_json(constraint)), text


def test_repeated_terms_write_back_as_the_same_constraint() -> None:
    """Found by the property above (CI, 2026-11-29): ``a a&host:n[1-2]`` compiles to a
    nested ``and`` repeating ``a``; its text ``a & a & host:n[1-2]`` compiles without the
    repetition. Both hold on the same nodes, so the text is written, not refused."""
    assert format_requires(compile_requires("a a&host:n[1-2]")) == "a & a & host:n[1-2]"
    assert not same_constraint({"properties": ["a"]}, {"properties": ["b"]})
    assert not same_constraint(
        {"and": [{"properties": ["a"]}, {"hostlist": ["n1"]}]},
        {"or": [{"properties": ["a"]}, {"hostlist": ["n1"]}]},
    )
