"""String patterns and expressions (sge_types(1), the 2003 specification's "String matching",
vectors/sge/wildcard.jsonl)."""

from __future__ import annotations

import fnmatch as stdlib_fnmatch
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.notations.gridengine.strings import (
    And,
    Expression,
    Not,
    Or,
    Pattern,
    StringExpressionError,
    check_semantics,
    fnmatch,
    is_expression,
    match_string,
    parse_expression,
)
from app.notations.quantities import ValueType
from tests.support.thoroughness import examples
from tests.vectors import sge_rows

WILDCARDS = [
    pytest.param(
        row,
        id=f"wildcard.jsonl:{n}:{row['semantics']}:{row['type']}:{row['pattern']!r}~{row['string']!r}",
    )
    for n, row in sge_rows("wildcard.jsonl")
]


@pytest.mark.parametrize("row", WILDCARDS)
def test_wildcard_vector(row: dict[str, Any]) -> None:
    semantics = check_semantics("6.0" if row["semantics"] == "sge60" else "6.1")
    value_type = ValueType[row["type"]]
    if row.get("syntax_error"):
        with pytest.raises(StringExpressionError) as caught:
            match_string(value_type, row["pattern"], row["string"], semantics=semantics)
        assert caught.value.position is not None
        assert row["match"] is False
    else:
        assert (
            match_string(value_type, row["pattern"], row["string"], semantics=semantics)
            is row["match"]
        )


# --- the 2003 specification's "String matching" examples ----------------------------------


def test_seed_restring_examples_hold_in_both_semantics() -> None:
    for semantics in ("6.0", "6.1"):
        assert match_string(ValueType.RESTRING, "linux|solaris", "solaris", semantics=semantics)
        assert match_string(ValueType.RESTRING, "[linux|solaris]", "[linux", semantics=semantics)
        assert not match_string(ValueType.RESTRING, "[linux|solaris]", "linux", semantics=semantics)


def test_seed_question_mark_needs_a_character_and_dot_is_literal() -> None:
    assert not fnmatch("a?", "a")
    assert fnmatch("a.c", "a.c") and not fnmatch("a.c", "abc")
    assert fnmatch("a\\\\b", "a\\b")


# --- the expression grammar -------------------------------------------------------------------


def test_sge_md_b_precedence_and_structure() -> None:
    assert parse_expression("a|b&c") == Or((Pattern("a"), And((Pattern("b"), Pattern("c")))))
    assert parse_expression("!a&b") == And((Not(Pattern("a")), Pattern("b")))
    assert parse_expression("(a|b)|c") == Or((Pattern("a"), Pattern("b"), Pattern("c")))
    assert parse_expression("plain") == Pattern("plain")
    assert parse_expression(" a | b ") == Or((Pattern("a"), Pattern("b")))


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("lx*|", 4, "a pattern"),
        ("|lx*", 0, "a pattern"),
        ("(lx*", 4, "')'"),
        ("lx*)", 3, "end of expression"),
        ("lx* sol*", 4, "blanks cannot separate"),
        ("a&&b", 2, "a pattern"),
        ("()", 1, "a pattern"),
        ("[!a]", 1, "end of expression"),
    ],
)
def test_sge_md_b_syntax_errors_carry_position(text: str, position: int, expected: str) -> None:
    with pytest.raises(StringExpressionError) as caught:
        parse_expression(text)
    assert caught.value.notation == "sge-expression"
    assert caught.value.position == position
    assert caught.value.expected is not None and expected in caught.value.expected


def test_sge_md_b_backslash_cannot_escape_operators() -> None:
    assert parse_expression("a\\|b") == Or((Pattern("a\\"), Pattern("b")))
    assert not match_string(ValueType.STRING, "a\\|b", "a|b")
    assert match_string(ValueType.STRING, "a\\|b", "b")


def test_sge_md_b_plain_strings_are_not_expressions() -> None:
    assert not is_expression("lx-amd64") and not is_expression("a b") and is_expression("a]")
    assert match_string(ValueType.STRING, "a b", "a b")  # blanks only matter in expressions


def test_fnmatch_details() -> None:
    assert fnmatch("[]a]", "]") and fnmatch("[a-]", "-")
    assert fnmatch("[\\]]", "]")
    assert not fnmatch("abc\\", "abc\\")  # a trailing backslash never matches (glibc)
    assert fnmatch("[z-a]x", "zx") is False  # reversed range is empty
    assert fnmatch("**a", "ba")


def test_string_type_required() -> None:
    with pytest.raises(ValueError, match="not a string type"):
        match_string(ValueType.INT, "1", "1")


# --- properties ----------------------------------------------------------------------------

expression_alphabet = st.text(alphabet="ab*?[]!&|() \\-", max_size=12)


@settings(max_examples=examples(400))
@given(text=st.one_of(expression_alphabet, st.text(max_size=12)), value=st.text(max_size=6))
def test_property_any_text_parses_or_raises_expression_error(text: str, value: str) -> None:
    try:
        expression = parse_expression(text)
    except StringExpressionError as error:
        assert error.position is not None and 0 <= error.position <= len(text)
        assert is_expression(text)
    else:
        assert parse_expression(expression.to_text()) == expression
        for value_type in (ValueType.STRING, ValueType.CSTRING, ValueType.HOST):
            assert isinstance(match_string(value_type, text, value), bool)


patterns = st.text(alphabet="ab*?", min_size=1, max_size=5).map(Pattern)


def _expressions() -> st.SearchStrategy[Expression]:
    return st.recursive(
        patterns,
        lambda inner: st.one_of(
            inner.map(Not),
            st.lists(inner, min_size=2, max_size=3).map(lambda ops: And(tuple(ops))),
            st.lists(inner, min_size=2, max_size=3).map(lambda ops: Or(tuple(ops))),
        ),
        max_leaves=6,
    )


def _flat(expression: Expression) -> Expression:
    """The flattened form the parser builds for nested And/Or."""
    if isinstance(expression, Not):
        return Not(_flat(expression.operand))
    if isinstance(expression, And | Or):
        kind = type(expression)
        flat: list[Expression] = []
        for operand in map(_flat, expression.operands):
            flat.extend(operand.operands if isinstance(operand, kind) else (operand,))
        return kind(tuple(flat))
    return expression


@settings(max_examples=examples(300))
@given(expression=_expressions())
def test_property_expression_text_round_trip(expression: Expression) -> None:
    assert parse_expression(expression.to_text()) == _flat(expression)


@settings(max_examples=examples(400))
@given(pattern=st.text(alphabet="ab*?.", max_size=6), value=st.text(alphabet="ab.", max_size=6))
def test_property_fnmatch_agrees_with_stdlib_without_brackets(pattern: str, value: str) -> None:
    assert fnmatch(pattern, value) is stdlib_fnmatch.fnmatchcase(value, pattern)
