"""Hostile input for every notation parser (issue 8): any string either parses, with a
canonical form that parses back to the same model, or raises the notation's own error —
never another exception, never a hang (hypothesis' per-example deadline catches those).

Alphabets lean towards each notation's own characters, so that inputs get past the first
character often enough to exercise the deeper rules.
"""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from itertools import islice
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.notations.errors import NotationError
from app.notations.flux import jobspec as rfc14
from app.notations.flux.constraints import ConstraintError, constraint_to_json, parse_constraint
from app.notations.flux.hostlist import parse_hostlist
from app.notations.flux.idset import parse_idset
from app.notations.flux.ranges import count_values, parse_count_string
from app.notations.flux.requires import compile_requires
from app.notations.flux.shape import format_shape, parse_shape_resources
from app.notations.gridengine.attribute_table import default_table
from app.notations.gridengine.load_thresholds import parse_load_thresholds
from app.notations.gridengine.queue_lists import parse_queue_list
from app.notations.gridengine.requests import parse_request_list
from app.notations.gridengine.strings import parse_expression
from app.notations.momotor.resources import Resources
from app.notations.quantities import ValueType, canonical_number, parse_number
from tests.support.thoroughness import examples

HOSTILE = settings(
    max_examples=examples(300),
    deadline=timedelta(milliseconds=500),
    suppress_health_check=[HealthCheck.too_slow],
)


def text_of(alphabet: str, max_size: int = 80) -> st.SearchStrategy[str]:
    """Mostly the notation's characters, sometimes any character at all."""
    return st.one_of(
        st.text(alphabet=alphabet, max_size=max_size),
        st.text(max_size=max_size),
    )


@HOSTILE
@given(text_of("abc019 ,:;?~\\'\"\n\t-_.<>=!"))
def test_momotor_tags(text: str) -> None:
    try:
        parsed = Resources.from_string(text)
    except NotationError:
        return
    # as_str is Momotor's, with its round-trip quirks (docs/notations/momotor.md, R1 and R2):
    # it always re-parses, and the second canonical form is a fixpoint.
    once = Resources.from_string(parsed.as_str())
    assert Resources.from_string(once.as_str()) == once


@HOSTILE
@given(text_of("0123456789,-[] "))
def test_rfc22_idset(text: str) -> None:
    try:
        parsed = parse_idset(text)
    except NotationError:
        return
    assert parse_idset(parsed.encode()) == parsed


@HOSTILE
@given(text_of("nodeab0123456789[]-, "))
def test_rfc29_hostlist(text: str) -> None:
    try:
        parsed = parse_hostlist(text)
    except NotationError:
        return
    assert parse_hostlist(str(parsed)) == parsed


@HOSTILE
@given(text_of("0123456789-+:*,[] "))
def test_rfc45_counts(text: str) -> None:
    try:
        parsed = parse_count_string(text)
    except NotationError:
        return
    # Same acceptable values (``3-3`` is written back as ``3``, which reads as an integer).
    again = parse_count_string(str(parsed))
    assert list(islice(count_values(again), 64)) == list(islice(count_values(parsed), 64))


@HOSTILE
@given(text_of("slotnodecore=0123456789/{}[];:+-x'\"lab,"))
def test_rfc46_shapes(text: str) -> None:
    try:
        parsed = parse_shape_resources(text)
    except NotationError:
        return
    assert parse_shape_resources(format_shape(parsed)) == parsed


json_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.sampled_from(["ssd", "^gpu", "node[0-3]", "0-3", "", "a!b", "x[1-"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(["and", "or", "not", "properties", "hostlist", "ranks", "bogus"]),
            children,
            max_size=2,
        ),
    ),
    max_leaves=20,
)


@HOSTILE
@given(json_values)
def test_rfc31_constraints(value: Any) -> None:
    try:
        parsed = parse_constraint(value)
    except ConstraintError:
        return
    assert parse_constraint(constraint_to_json(parsed)) == parsed


@HOSTILE
@given(text_of("host:rank:node[0-3] ssd-|&()^,'\""))
def test_rfc35_requires(text: str) -> None:
    try:
        compiled = compile_requires(text)
    except NotationError:
        return
    json.dumps(compiled)  # always a JSON object, which RFC 31 then accepts or refuses
    with contextlib.suppress(ConstraintError):
        parse_constraint(compiled)


@HOSTILE
@given(
    st.recursive(
        json_values,
        lambda c: st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["node", "slot", "core", ""]),
                    "count": st.one_of(st.integers(-1, 3), st.just({"min": 1}), st.just("1-3")),
                },
                optional={"with": c, "label": st.just("x"), "exclusive": st.booleans()},
            ),
            max_size=3,
        ),
        max_leaves=6,
    )
)
def test_rfc14_resources(value: Any) -> None:
    try:
        parsed = rfc14.validate_resources(value)
    except NotationError:
        return
    assert rfc14.load_resources_json(rfc14.dump_resources_json(parsed)) == parsed


@HOSTILE
@given(st.sampled_from(list(ValueType)[:5]), text_of("0123456789.:eE+-kKmMgGxX TRUEfalsINFIY"))
def test_sge_numbers(value_type: ValueType, text: str) -> None:
    try:
        value = parse_number(text, value_type)
    except NotationError:
        return
    assert parse_number(canonical_number(value, value_type), value_type) == value


@HOSTILE
@given(text_of("lx*?[]^!|&()-amd64 "))
def test_sge_string_expressions(text: str) -> None:
    try:
        parsed = parse_expression(text)
    except NotationError:
        return
    assert parse_expression(parsed.to_text()) == parsed


TABLE = default_table()


@HOSTILE
@given(text_of("h_vmem=2G,arch=lx*mem_freeslots1:0 "))
def test_sge_request_lists(text: str) -> None:
    try:
        parsed = parse_request_list(text, TABLE)
    except NotationError:
        return
    assert parse_request_list(parsed.to_text(), TABLE) == parsed


@HOSTILE
@given(text_of("ab.q*?[]!|&()@, \t1-"))
def test_grid_engine_queue_lists(text: str) -> None:
    """qsub -q lists (sge_types(1) wc_queue_list): the canonical text parses back."""
    try:
        parsed = parse_queue_list(text)
    except NotationError:
        return
    if parsed:
        assert parse_queue_list(parsed.category_text()) == parsed
        parsed.contains("all.q", "h1")


@HOSTILE
@given(text_of("np_load_avgmemfr=,.1GkM \t"))
def test_grid_engine_load_thresholds(text: str) -> None:
    """queue_conf(5) load_thresholds: the stored text parses back to the same list."""
    try:
        parsed = parse_load_thresholds(text, TABLE)
    except NotationError:
        return
    assert parse_load_thresholds(parsed.text(), TABLE).text() == parsed.text()
