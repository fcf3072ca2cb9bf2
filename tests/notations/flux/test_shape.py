"""RFC 46 shapes: every line of vectors/flux/shape.jsonl and conventions C1-C10."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.jobspec import resources_to_json
from app.notations.flux.shape import (
    MAX_SHAPE_DEPTH,
    ShapeError,
    format_shape,
    parse_shape,
    parse_shape_resources,
)
from tests.vectors import FLUX

VECTORS = FLUX
ROWS = [json.loads(line) for line in (VECTORS / "shape.jsonl").read_text().splitlines()]


def _options(row: dict[str, Any]) -> dict[str, Any]:
    """Map a line's `convention` to parse_shape options (C5 label, C1/C2 or string ranges)."""
    convention = row.get("convention", "")
    if convention == "rfc46":
        options: dict[str, Any] = {"default_label": "default"}
    elif "rangedict" in convention:
        options = {"default_label": "task"}
    else:
        options = {"default_label": "task", "ranges": "string"}
    if "label" in row.get("input_option", {}):
        options["default_label"] = row["input_option"]["label"]
    return options


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(row, id=f"shape.jsonl:{row.get('convention', 'error')}:{row['input']}:{i}")
        for i, row in enumerate(ROWS)
    ],
)
def test_vector_shape(row: dict[str, Any]) -> None:
    if row.get("error"):
        with pytest.raises(ShapeError) as caught:
            parse_shape(row["input"])
        expected_kind = "slot" if "require labels" in row.get("note", "") else "syntax"
        assert caught.value.kind == expected_kind
        assert caught.value.position is not None
        return
    options = _options(row)
    result = parse_shape(row["input"], **options)
    if "expected" in row:
        assert result == row["expected"]
    else:
        # flux-core prints `"max": Infinity` here; C2 forbids copying it (see the line's note).
        assert "Infinity" in row["expected_text"]
        assert result[0]["count"] == {"min": 3, "operator": "+", "operand": 2}
        json.dumps(result, allow_nan=False)
    if options.get("ranges") != "string":
        text = format_shape(result, options["default_label"])
        assert parse_shape(text, options["default_label"]) == result


def test_rfc46_examples_format_back_to_themselves() -> None:
    """format_shape writes each RFC 46 example exactly as the RFC does (canonical form)."""
    for row in ROWS:
        if row.get("convention") == "rfc46":
            assert format_shape(parse_shape(row["input"])) == row["input"]


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("node=3-30", {"min": 3, "max": 30, "operator": "+", "operand": 1}),  # C1, C4
        ("node=[2-8:2:*]", {"min": 2, "max": 8, "operator": "*", "operand": 2}),  # C1
        ("node=2+", {"min": 2}),  # C2
        ("node=2+:1:+", {"min": 2}),  # C2
        ("node=2+:3:*", {"min": 2, "operator": "*", "operand": 3}),  # C2
        ("node=[4,9]", "4,9"),  # C3 brackets stripped
        ("node=2,3,4", "2,3,4"),  # C3 no re-compression
        ("node=[5]", 5),  # C4
    ],
)
def test_conventions_c1_to_c4_counts(text: str, count: object) -> None:
    assert parse_shape(text)[0]["count"] == count


def test_convention_c5_default_label_parameter() -> None:
    assert parse_shape("slot/core")[0]["label"] == "default"
    assert parse_shape("slot/core", default_label="task")[0]["label"] == "task"


def test_convention_c6_x_only_as_vertex_key() -> None:
    assert parse_shape("slot{x}/node")[0]["label"] == "x"
    assert parse_shape("node{x}")[0]["exclusive"] is True
    assert parse_shape("node{opts:{x,-y}}")[0]["opts"] == {"x": True, "y": False}
    assert parse_shape('node{"x":1}')[0] == {"type": "node", "count": 1, "x": 1}


def test_convention_c7_labels_are_strings() -> None:
    assert parse_shape("slot{42}/core")[0]["label"] == "42"


def test_convention_c8_value_typing() -> None:
    vertex = parse_shape(
        'node{a:1e3,b:-7,c:2.5,d:3a,e:0-1,f:GB,g:"true",h:true,i:null,j:[1,[2]],k:{m:n}}'
    )[0]
    assert vertex["a"] == 1000.0 and vertex["b"] == -7 and vertex["c"] == 2.5
    assert vertex["d"] == "3a" and vertex["e"] == "0-1" and vertex["f"] == "GB"
    assert vertex["g"] == "true" and vertex["h"] is True and vertex["i"] is None
    assert vertex["j"] == [1, [2]] and vertex["k"] == {"m": "n"}
    with pytest.raises(ShapeError) as caught:
        parse_shape("[node{tags:[a,b]};core]")  # arrays are strict JSON
    assert caught.value.kind == "syntax"
    assert parse_shape('[node{tags:["a]"]};core]')[0]["tags"] == ["a]"]


def test_convention_c9_rfc14_checks() -> None:
    cases = {
        "node{exclusive:yes}": "rfc14",
        "node{unit:5}": "rfc14",
        "node=0": "count",
        "node=3-1": "count",
        "node=2-8:1:*": "count",
        "node=3,1": "count",
        "node=2,2": "count",
        "node=0,1": "count",
        "[slot{a}/core;slot{a}/core]": "slot",
        "[slot/node;slot{b}/core]": "slot",  # regardless of order (A8)
        "[slot{b}/core;slot/node]": "slot",
        "slot{a}/slot/core": "slot",
    }
    for text, kind in cases.items():
        with pytest.raises(ShapeError) as caught:
            parse_shape(text)
        assert caught.value.kind == kind, text
    assert parse_shape("node{colour:blue}")[0]["colour"] == "blue"  # extension keys pass


def test_convention_c10_no_whitespace_outside_quotes() -> None:
    for text in ("slot=4 / node", " node", "node ", "node{a: 1}", "node{a:[1, 2]}"):
        with pytest.raises(ShapeError, match="whitespace") as caught:
            parse_shape(text)
        assert caught.value.kind == "syntax"
    assert parse_shape("node{a:'x y'}")[0]["a"] == "x y"


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        ("[]", 1),
        ("a;b", 1),
        ("[a;b]/c", 5),
        ("node{,}", 5),
        ("node{a,}", 7),
        ("node{a:}", 7),
        ("node=", 5),
        ("slot{}/core", 5),
        ("slot{a:b}/core", 6),
        ("slot{+x}/core", 5),
        ("slot=2", 6),
        ("node{count:3}", 5),
        ("node{x,-x}", 7),
        ("node{+a:1}", 7),
        ("Slot/core{'a}", 10),
    ],
)
def test_syntax_errors_carry_positions(text: str, position: int) -> None:
    with pytest.raises(ShapeError) as caught:
        parse_shape(text)
    assert caught.value.kind == "syntax" and caught.value.notation == "rfc46-shape"
    assert caught.value.position == position


def test_format_shape_refuses_lists_without_a_shape() -> None:
    with pytest.raises(ShapeError, match="only slots"):
        format_shape([{"type": "node", "count": 1, "label": "n"}])
    with pytest.raises(ShapeError, match="exclusive"):
        parse_shape("slot{a,x:1}/core")  # C6: unquoted x is exclusive, which must be boolean
    model = parse_shape_resources('slot{a,unit:GB,"x":1}/core')
    assert resources_to_json(model)[0]["x"] == 1
    assert format_shape(model) == 'slot{a,unit:GB,"x":1}/core'


def test_bounded_nesting() -> None:
    with pytest.raises(ShapeError, match="deeper"):
        parse_shape("/".join(["a"] * (MAX_SHAPE_DEPTH + 2)))
    with pytest.raises(ShapeError):
        parse_shape("node{a:" + "[" * 5000 + "]" * 5000 + "}")


words = st.sampled_from(["node", "core", "gpu", "my type", "x", "a+b", "1", "true"])
values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["GB", "a b", "3", ""]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(words, inner, max_size=2),
    max_leaves=4,
)
counts = st.sampled_from([1, 2, "4,9", "2+", "3-30", "2-8:2:*", {"min": 2}, "1,3-5"])


def _vertices(depth: int) -> st.SearchStrategy[list[dict[str, Any]]]:
    def build(
        t: str, c: object, extra: dict[str, Any], kids: list[dict[str, Any]]
    ) -> dict[str, Any]:
        vertex: dict[str, Any] = {"type": t, "count": c, **extra}
        if kids:
            vertex["with"] = kids
        return vertex

    kids = _vertices(depth - 1) if depth > 0 else st.just([])
    extra = st.dictionaries(
        st.sampled_from(["unit", "exclusive", "colour", "x", "+k"]), values, max_size=2
    ).map(
        lambda d: {
            k: (bool(v) if k == "exclusive" else str(v) if k == "unit" else v) for k, v in d.items()
        }
    )
    return st.lists(st.builds(build, words, counts, extra, kids), min_size=1, max_size=2)


@given(_vertices(2))
def test_property_format_then_parse_round_trips(resources: list[dict[str, Any]]) -> None:
    model_json = resources_to_json(parse_shape_resources(format_shape(resources)))
    assert parse_shape(format_shape(resources)) == model_json


@given(st.text(alphabet="slotnde=/{}[];,:+-x0123'\" ", max_size=30))
def test_property_only_notation_errors(text: str) -> None:
    try:
        parse_shape(text)
    except NotationError as error:
        assert isinstance(error, ShapeError)
        assert error.kind in ("syntax", "count", "slot", "rfc14")


@pytest.mark.parametrize(
    ("text", "kind", "position"),
    [
        # A count token that is not well-formed RFC 45 text: a range with a dangling
        # separator, an idset with a trailing comma, an operand without a range.
        ("node=1-", "syntax", 6),
        ("node=2-8:", "syntax", 8),
        ("node=2,", "syntax", 7),
        ("node=1:2", "syntax", 6),
        ("node=[2-]", "syntax", 7),
        # Well-formed counts that break RFC 14's count rules stay count errors.
        ("node=0", "count", 5),
        ("node=3-1", "count", 5),
        ("node=08", "count", 5),
    ],
)
def test_error_classes_of_count_tokens_follow_the_rfc46_classes(
    text: str, kind: str, position: int
) -> None:
    """The error classes of RFC 46 shapes as jobmatch's Flux notes sort them (section 5.5 of
    the notes, copied here): ``syntax`` covers grammar violations, among them "bad count
    token"; ``count`` covers the RFC 22/45/14 count rules (0, leading zeros, max < min,
    operand rules, idset order). So a count that is not a well-formed RFC 45 string is a
    syntax error, pointing at the first character that does not continue a well-formed count."""
    with pytest.raises(ShapeError) as caught:
        parse_shape(text)
    assert caught.value.kind == kind
    assert caught.value.position == position
