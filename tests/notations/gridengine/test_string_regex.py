"""The regex compilation of string requests agrees with the reference matcher
(sge_types(1), vectors/sge/wildcard.jsonl)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.notations.gridengine.string_regex import request_regex
from app.notations.gridengine.strings import StringExpressionError, match_string
from app.notations.quantities import ValueType
from tests.support.thoroughness import examples
from tests.vectors import SGE

VECTORS = SGE / "wildcard.jsonl"


def _regex_matches(value_type: ValueType, pattern: str, value: str) -> bool:
    folds = value_type in (ValueType.CSTRING, ValueType.HOST)
    subject = value.lower() if folds else value
    return re.search(request_regex(value_type, pattern), subject) is not None


def _vectors() -> list[dict[str, object]]:
    rows = [json.loads(line) for line in VECTORS.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["semantics"] != "sge60"]


@pytest.mark.parametrize("row", _vectors(), ids=lambda row: f"{row['pattern']}~{row['string']}")
def test_wildcard_vectors(row: dict[str, object]) -> None:
    value_type = ValueType.parse(str(row["type"]))
    pattern, value = str(row["pattern"]), str(row["string"])
    try:
        expected = match_string(value_type, pattern, value)
    except StringExpressionError:
        with pytest.raises(StringExpressionError):
            request_regex(value_type, pattern)
        return
    assert expected == row["match"]
    assert _regex_matches(value_type, pattern, value) is expected


ALPHABET = "ab.-*?[]^!\\|&()Az/ é"


@settings(max_examples=examples(400), deadline=None)
@given(
    value_type=st.sampled_from([ValueType.STRING, ValueType.CSTRING, ValueType.HOST]),
    pattern=st.text(alphabet=ALPHABET, max_size=8),
    value=st.text(alphabet="ab.-*?[]^!\\Az/ é", max_size=6),
)
def test_regex_equals_reference(value_type: ValueType, pattern: str, value: str) -> None:
    try:
        expected = match_string(value_type, pattern, value)
    except StringExpressionError:
        return
    assert _regex_matches(value_type, pattern, value) is expected


def test_plain_string_keeps_backslash_literal() -> None:
    assert _regex_matches(ValueType.STRING, "a\\b", "a\\b")
    assert not _regex_matches(ValueType.STRING, "a\\b", "ab")


def test_numeric_type_is_refused() -> None:
    with pytest.raises(ValueError, match="not a string type"):
        request_regex(ValueType.INT, "1")
