"""RFC 14 resources lists: validation rules, model, canonical JSON and YAML."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux.jobspec import (
    MAX_DEPTH,
    JobspecError,
    ResourceVertex,
    dump_resources_json,
    dump_resources_yaml,
    load_resources_json,
    load_resources_yaml,
    resources_to_json,
    validate_resources,
    walk,
)
from app.notations.flux.ranges import RangeCount
from tests.vectors import FLUX

VECTORS = FLUX
SHAPE_ROWS = [json.loads(line) for line in (VECTORS / "shape.jsonl").read_text().splitlines()]
RFC46_EXPANSIONS = [
    pytest.param(row["expected"], id=f"shape.jsonl:rfc46:{row['input']}")
    for row in SHAPE_ROWS
    if row.get("convention") == "rfc46"
]

USE_CASE_1_3_YAML = """\
- type: slot
  count: 4
  label: nodelevel
  with:
  - type: node
    count: 1
    exclusive: false
    with:
    - type: socket
      count:
        min: 2
      with:
      - type: core
        count:
          min: 4
"""


@pytest.mark.parametrize("resources", RFC46_EXPANSIONS)
def test_rfc46_expansions_are_valid_rfc14_and_round_trip(resources: list[Any]) -> None:
    """Every RFC 46 example expansion (shape.jsonl, RFC 14 use cases) validates; canonical
    JSON and YAML read back to the same model and the same dicts."""
    model = validate_resources(resources)
    assert resources_to_json(model) == resources
    assert load_resources_json(dump_resources_json(model)) == model
    assert load_resources_yaml(dump_resources_yaml(model)) == model
    assert json.loads(dump_resources_json(model)) == resources


def test_yaml_layout_matches_rfc46_use_case_1_3() -> None:
    """RFC 46 use case 1.3: canonical YAML is the RFC's own text."""
    model = load_resources_yaml(USE_CASE_1_3_YAML)
    assert dump_resources_yaml(model) == USE_CASE_1_3_YAML


def test_canonical_json_key_order() -> None:
    model = validate_resources(
        [{"with": [{"count": 1, "type": "core"}], "label": "a", "count": 2, "type": "slot"}]
    )
    assert dump_resources_json(model) == (
        '[{"type":"slot","count":2,"label":"a","with":[{"type":"core","count":1}]}]'
    )


@pytest.mark.parametrize(
    ("resources", "rule", "path"),
    [
        ([], "structure", "resources"),
        ({"type": "node"}, "structure", "resources"),
        ([{"count": 1}], "structure", "resources[0]"),
        ([{"type": "", "count": 1}], "type", "resources[0].type"),
        ([{"type": "node", "count": 0}], "count", "resources[0].count"),
        ([{"type": "node", "count": "3,1"}], "count", "resources[0].count"),
        (
            [{"type": "node", "count": {"min": 1, "max": 2, "operator": "+"}}],
            "count",
            "resources[0].count",
        ),
        (
            [{"type": "slot", "count": 1, "with": [{"type": "core", "count": 1}]}],
            "slot",
            "resources[0]",
        ),
        ([{"type": "slot", "count": 1, "label": "a"}], "slot", "resources[0]"),
        (
            [
                {"type": "slot", "count": 1, "label": "a", "with": [{"type": "core", "count": 1}]},
                {"type": "slot", "count": 1, "label": "a", "with": [{"type": "core", "count": 1}]},
            ],
            "slot",
            "resources[1].label",
        ),
        ([{"type": "node", "count": 1, "exclusive": "yes"}], "type", "resources[0].exclusive"),
        ([{"type": "node", "count": 1, "unit": 5}], "type", "resources[0].unit"),
        ([{"type": "node", "count": 1, "id": 3}], "type", "resources[0].id"),
        ([{"type": "node", "count": 1, "with": []}], "structure", "resources[0].with"),
        ([{"type": "node", "count": 1, "x": float("nan")}], "type", "resources[0].x"),
    ],
)
def test_rfc14_rules_convention_c9(resources: object, rule: str, path: str) -> None:
    """RFC 14 (docs/notations/flux.md) and C9: reserved keys, counts, slot label/with, label
    uniqueness."""
    with pytest.raises(JobspecError) as caught:
        validate_resources(resources)
    assert caught.value.rule == rule
    assert caught.value.path == path
    assert caught.value.notation == "rfc14-jobspec"


def test_extension_keys_pass_unless_strict_schema() -> None:
    """A7/C9: extension keys pass through; the RFC 14 schema's additionalProperties:false
    is available as allow_extensions=False."""
    resources = [{"type": "node", "count": 1, "colour": {"b": [1, 2], "a": None}}]
    model = validate_resources(resources)
    assert model[0].extension_values() == {"colour": {"a": None, "b": [1, 2]}}
    assert resources_to_json(model) == resources
    with pytest.raises(JobspecError, match="unknown key 'colour'"):
        validate_resources(resources, allow_extensions=False)


def test_counts_become_models() -> None:
    model = validate_resources(
        [{"type": "node", "count": "3-30"}, {"type": "core", "count": {"min": 2}}]
    )
    assert model[0].count == RangeCount(3, 30) and model[1].count == RangeCount(2)
    assert resources_to_json(model, ranges="string") == [
        {"type": "node", "count": "3-30"},
        {"type": "core", "count": "2+"},
    ]


def test_exclusive_defaults_follow_rfc14() -> None:
    """RFC 14: exclusive defaults false outside slots, true inside unless a vertex says so."""
    model = load_resources_yaml(USE_CASE_1_3_YAML)
    flags = [(vertex.type, exclusive) for _, vertex, exclusive in walk(model)]
    assert flags == [("slot", True), ("node", False), ("socket", True), ("core", True)]
    outside = validate_resources([{"type": "node", "count": 1}])
    assert [exclusive for _, _, exclusive in walk(outside)] == [False]


def test_bounded_depth_and_bad_text() -> None:
    deep: list[Any] = [{"type": "core", "count": 1}]
    for _ in range(MAX_DEPTH + 1):
        deep = [{"type": "group", "count": 1, "with": deep}]
    with pytest.raises(JobspecError, match="deeper"):
        validate_resources(deep)
    with pytest.raises(JobspecError) as caught:
        load_resources_json("[{")
    assert caught.value.position == 2
    with pytest.raises(JobspecError):
        load_resources_yaml("- type: [unclosed")


def test_model_is_immutable() -> None:
    vertex = validate_resources([{"type": "node", "count": 1}])[0]
    assert isinstance(vertex, ResourceVertex)
    with pytest.raises(AttributeError):
        vertex.type = "core"  # type: ignore[misc]
    assert hash(vertex) == hash(ResourceVertex("node", 1))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-9, 9) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=5,
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["node", "core", "gpu"]),
                "count": st.sampled_from([1, 3, "2+", "1-4:1:+", {"min": 5}]),
            },
            optional={
                "unit": st.text(max_size=3),
                "exclusive": st.booleans(),
                "extra": json_values,
            },
        ),
        min_size=1,
        max_size=3,
    )
)
def test_property_json_and_yaml_round_trip(resources: list[dict[str, Any]]) -> None:
    model = validate_resources(resources)
    assert load_resources_json(dump_resources_json(model)) == model
    assert load_resources_yaml(dump_resources_yaml(model)) == model
    assert yaml.safe_load(dump_resources_yaml(model)) == resources_to_json(model)


@given(json_values)
def test_property_only_notation_errors(value: object) -> None:
    try:
        validate_resources(value)
    except NotationError as error:
        assert isinstance(error, JobspecError)
