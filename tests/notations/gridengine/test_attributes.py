"""Complex definitions, the attribute table and comparisons.

Sources: complex(5), section 2 ("Restrictions") of the 2003 Complex Attribute Specification,
docs/notations/gridengine.md,
vectors/sge/compare.jsonl and vectors/sge/complex_defaults.jsonl.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.notations.gridengine.attribute_table import (
    ComplexTable,
    check_table_change,
    default_table,
)
from app.notations.gridengine.default_table import DEFAULT_COMPLEX_ROWS
from app.notations.gridengine.definitions import (
    ComplexDefinition,
    ComplexError,
    Consumable,
    Relop,
    Requestable,
    definitions_from_rows,
)
from app.notations.gridengine.strings import check_semantics
from app.notations.gridengine.values import (
    compare,
    compare_text,
    consumable_fits,
    consumable_slot_capacity,
    exclusive_fits,
    format_value,
    normalize_value,
    parse_value,
)
from app.notations.quantities import INFINITY, QuantityError, ValueType, parse_number
from tests.support.thoroughness import examples
from tests.vectors import sge_rows


def _definition(
    value_type: str,
    relop: str,
    *,
    consumable: str = "NO",
    requestable: str = "YES",
    default: str | None = None,
    name: str = "attr",
) -> ComplexDefinition:
    if default is None:
        default = "NONE" if ValueType[value_type].is_string else "0"
    return ComplexDefinition.from_row(
        {
            "name": name,
            "shortcut": name[:3] + "_",
            "type": value_type,
            "relop": relop,
            "requestable": requestable,
            "consumable": consumable,
            "default": default,
            "urgency": 0,
        }
    )


def test_table_text_round_trip() -> None:
    table = default_table()
    back = ComplexTable.from_text("# name shortcut ...\n\n" + table.to_text())
    assert set(back.definitions) == set(table.definitions)


def test_table_lookup_prefers_names_and_suggests_nearest() -> None:
    table = default_table()
    assert table["h"].name == "hostname"
    assert table.lookup("nope") is None
    with pytest.raises(ComplexError, match="did you mean 'mem_free'"):
        table.resolve("mem_fre")


# --- complex(5): validity rules of the attribute table -----------------------------------------


@pytest.mark.parametrize("value_type", ["STRING", "CSTRING", "RESTRING", "HOST"])
@pytest.mark.parametrize("relop", ["==", "!="])
def test_seed2_string_types_allow_eq_and_ne(value_type: str, relop: str) -> None:
    assert _definition(value_type, relop).relop.value == relop


@pytest.mark.parametrize("value_type", ["STRING", "CSTRING", "RESTRING", "HOST"])
@pytest.mark.parametrize("relop", ["<=", "<", ">=", ">", "EXCL"])
def test_seed2_string_types_reject_ordering_relops(value_type: str, relop: str) -> None:
    with pytest.raises(ComplexError, match=f"relop {relop} is not allowed for type"):
        _definition(value_type, relop)


@pytest.mark.parametrize("value_type", ["STRING", "CSTRING", "RESTRING", "HOST"])
def test_seed2_string_types_cannot_be_consumable(value_type: str) -> None:
    with pytest.raises(ComplexError, match="cannot be consumable"):
        _definition(value_type, "==", consumable="YES")


@pytest.mark.parametrize("value_type", ["INT", "DOUBLE", "MEMORY", "TIME"])
@pytest.mark.parametrize("relop", ["==", "!=", "<=", "<", ">=", ">"])
def test_seed2_numeric_types_allow_all_relops_but_excl(value_type: str, relop: str) -> None:
    assert _definition(value_type, relop).relop.value == relop


@pytest.mark.parametrize("value_type", ["INT", "DOUBLE", "MEMORY", "TIME"])
def test_sge_md_c_excl_only_for_bool(value_type: str) -> None:
    with pytest.raises(ComplexError, match="EXCL is only allowed for BOOL consumables"):
        _definition(value_type, "EXCL", consumable="YES")


@pytest.mark.parametrize("relop", ["!=", "<=", "<", ">=", ">"])
def test_seed2_bool_only_eq(relop: str) -> None:
    with pytest.raises(ComplexError, match="not allowed for type BOOL"):
        _definition("BOOL", relop)


def test_sge_md_c_bool_excl_needs_consumable_and_bool_consumable_needs_excl() -> None:
    assert _definition("BOOL", "EXCL", consumable="YES").relop is Relop.EXCL
    assert _definition("BOOL", "EXCL", consumable="JOB").consumable is Consumable.JOB
    with pytest.raises(ComplexError, match="EXCL needs a consumable"):
        _definition("BOOL", "EXCL")
    with pytest.raises(ComplexError, match="BOOL consumable must use relop EXCL"):
        _definition("BOOL", "==", consumable="YES")


@pytest.mark.parametrize("value_type", ["INT", "DOUBLE", "MEMORY", "TIME"])
@pytest.mark.parametrize("consumable", ["YES", "JOB"])
@pytest.mark.parametrize("relop", ["==", "!=", "<", ">=", ">"])
def test_seed2_consumables_only_le(value_type: str, consumable: str, relop: str) -> None:
    assert _definition(value_type, "<=", consumable=consumable).consumable.value == consumable
    with pytest.raises(ComplexError, match="consumable must use relop <="):
        _definition(value_type, relop, consumable=consumable)


def test_seed2_non_requestable_consumable_needs_nonzero_default() -> None:
    assert _definition("INT", "<=", consumable="YES", requestable="NO", default="2").default == "2"
    with pytest.raises(ComplexError, match="non-requestable consumable needs a non-zero default"):
        _definition("INT", "<=", consumable="YES", requestable="NO", default="0")


def test_seed2_forced_consumable_must_not_have_default() -> None:
    assert _definition("INT", "<=", consumable="YES", requestable="FORCED").default == "0"
    with pytest.raises(ComplexError, match="forced consumable must not have a default"):
        _definition("INT", "<=", consumable="YES", requestable="FORCED", default="1")


@pytest.mark.parametrize(
    ("value_type", "relop", "default"),
    [("INT", "==", "1"), ("MEMORY", "<=", "1G"), ("TIME", "<=", "0:0:1"), ("STRING", "==", "x")],
)
def test_seed2_defaults_only_for_consumables(value_type: str, relop: str, default: str) -> None:
    with pytest.raises(ComplexError, match="defaults are only meaningful for consumables"):
        _definition(value_type, relop, default=default)


def test_sge_md_c_zero_default_spellings_for_non_consumables() -> None:
    assert _definition("TIME", "<=", default="0:0:0").default_value == 0
    assert _definition("STRING", "==", default="none").default_value == "none"


@pytest.mark.parametrize("default", ["INFINITY", "-1", "abc"])
def test_sge_md_c_consumable_default_is_a_valid_amount(default: str) -> None:
    with pytest.raises(ComplexError, match="invalid default"):
        _definition("MEMORY", "<=", consumable="YES", default=default)


def test_sge_md_c_urgency_must_be_a_number() -> None:
    row = dict(default_table()["slots"].to_row(), urgency="high")
    with pytest.raises(ComplexError, match="urgency of 'slots'"):
        ComplexDefinition.from_row(row)


def test_sge_md_c_tmpdir_never_requestable() -> None:
    with pytest.raises(ComplexError, match="tmpdir can never be requestable"):
        _definition("RESTRING", "==", name="tmpdir")


@pytest.mark.parametrize("name", ["", "a b", "a=b", "a,b", "a|b", "a/b"])
def test_names_must_be_usable_in_request_lists(name: str) -> None:
    with pytest.raises(ComplexError):
        _definition("INT", "<=", name=name)


@pytest.mark.parametrize(
    ("text", "hint"), [("=<", "'<='"), ("=>", "'>='"), ("=", "'=='"), ("<>", "'!='")]
)
def test_seed2_relop_spellings_of_the_seed_are_rejected_with_a_hint(text: str, hint: str) -> None:
    with pytest.raises(ComplexError, match=f"did you mean {hint}"):
        Relop.parse(text)


def test_keyword_columns() -> None:
    assert Relop.parse("excl") is Relop.EXCL
    assert Requestable.parse("forced") is Requestable.FORCED
    assert Consumable.parse("job") is Consumable.JOB
    with pytest.raises(ComplexError, match="did you mean 'FORCED'"):
        Requestable.parse("FORCE")
    with pytest.raises(ComplexError, match="invalid consumable value 'y'"):
        Consumable.parse("y")


def test_from_line_points_at_the_bad_column() -> None:
    with pytest.raises(ComplexError) as caught:
        ComplexDefinition.from_line("foo f STRING <= YES NO NONE 0")
    assert caught.value.position == 13
    with pytest.raises(ComplexError) as caught:
        ComplexDefinition.from_line("foo f INT <= NO YES 0 0")
    assert caught.value.position == 20
    with pytest.raises(ComplexError, match="8 columns, found 7"):
        ComplexDefinition.from_line("foo f INT <= NO YES 0")
    with pytest.raises(ComplexError, match="unknown complex type 'INTEGER'"):
        ComplexDefinition.from_line("foo f INTEGER <= NO NO 0 0")


def test_from_row_names_missing_columns() -> None:
    with pytest.raises(ComplexError, match="lacks relop"):
        ComplexDefinition.from_row({"name": "x", "shortcut": "x", "type": "INT"})


def test_sge_md_c_names_and_shortcuts_unique_across_both_columns() -> None:
    rows = [dict(r) for r in DEFAULT_COMPLEX_ROWS]
    clash_name = dict(rows[0], name="mf", shortcut="mfx")  # "mf" is mem_free's shortcut
    with pytest.raises(ComplexError, match="already used"):
        ComplexTable(definitions_from_rows([*rows, clash_name]))
    clash_shortcut = dict(rows[0], name="fresh", shortcut="arch")
    with pytest.raises(ComplexError, match="already used"):
        ComplexTable(definitions_from_rows([*rows, clash_shortcut]))


def test_seed2_builtins_cannot_be_deleted_or_change_type() -> None:
    old = default_table()
    kept = [d for d in old if d.name != "arch"]
    with pytest.raises(ComplexError, match="'arch' cannot be deleted"):
        check_table_change(old, ComplexTable(tuple(kept)))
    as_cstring = [
        ComplexDefinition.from_row(dict(d.to_row(), type="CSTRING")) if d.name == "arch" else d
        for d in old
    ]
    check_table_change(old, ComplexTable(tuple(as_cstring)))  # string family: allowed
    as_host = [
        ComplexDefinition.from_row(dict(d.to_row(), type="HOST")) if d.name == "arch" else d
        for d in old
    ]
    with pytest.raises(ComplexError, match="cannot change from RESTRING to HOST"):
        check_table_change(old, ComplexTable(tuple(as_host)))
    as_double = [
        ComplexDefinition.from_row(dict(d.to_row(), type="DOUBLE")) if d.name == "num_proc" else d
        for d in old
    ]
    with pytest.raises(ComplexError, match="cannot change from INT to DOUBLE"):
        check_table_change(old, ComplexTable(tuple(as_double)))
    added = [*old, _definition("INT", "<=", name="custom")]
    check_table_change(old, ComplexTable(tuple(added)))


# --- compare.jsonl ---------------------------------------------------------------------------

COMPARE_ROWS = sge_rows("compare.jsonl")


def _compare_id(number: int, row: dict[str, Any]) -> str:
    semantics = row.get("semantics", "")
    return (
        f"compare.jsonl:{number}:{row['type']}:{row['requested']}{row['relop']}"
        f"{row['configured']}{':' + semantics if semantics else ''}"
    )


PLAIN_COMPARES = [
    pytest.param(r, id=_compare_id(n, r)) for n, r in COMPARE_ROWS if "consumable" not in r
]
EXCL_COMPARES = [
    pytest.param(r, id=_compare_id(n, r)) for n, r in COMPARE_ROWS if r["relop"] == "EXCL"
]
SLOT_COMPARES = [pytest.param(r, id=_compare_id(n, r)) for n, r in COMPARE_ROWS if "slots" in r]


def test_compare_vectors_all_covered() -> None:
    assert len(PLAIN_COMPARES) + len(EXCL_COMPARES) + len(SLOT_COMPARES) == len(COMPARE_ROWS)


@pytest.mark.parametrize("row", PLAIN_COMPARES)
def test_compare_vector(row: dict[str, Any]) -> None:
    semantics = check_semantics("6.0" if row.get("semantics") == "sge60" else "6.1")
    value_type = ValueType[row["type"]]
    relop = Relop.parse(row["relop"])
    assert (
        compare_text(value_type, relop, row["requested"], row["configured"], semantics=semantics)
        is row["match"]
    )


@pytest.mark.parametrize("row", EXCL_COMPARES)
def test_compare_vector_excl(row: dict[str, Any]) -> None:
    definition = _definition("BOOL", "EXCL", consumable=row["consumable"])
    requested = parse_value(definition, row["requested"])
    capacity = parse_value(definition, row["configured"], role="capacity")
    assert isinstance(requested, float) and isinstance(capacity, float)
    fits = exclusive_fits(requested, capacity, row["exclusive_in_use"], row["non_exclusive_in_use"])
    assert fits is row["match"]


@pytest.mark.parametrize("row", SLOT_COMPARES)
def test_compare_vector_consumable_slots(row: dict[str, Any]) -> None:
    value_type = ValueType[row["type"]]
    consumable = Consumable.parse(row["consumable"])
    capacity = parse_number(row["configured"], value_type, consumable=True)
    used = parse_number(row["used"], value_type, consumable=True)
    requested = parse_number(row["requested"], value_type, consumable=True)
    assert consumable_fits(consumable, capacity, used, requested, row["slots"]) is row["match"]
    if consumable is Consumable.YES:
        slots = consumable_slot_capacity(capacity, used, requested)
        assert slots is not None and (row["slots"] <= slots) is row["match"]


# --- complex(5): orientation and string relops ---------------------------------------------


def test_sge_md_a_requested_relop_offered() -> None:
    assert compare(ValueType.DOUBLE, Relop.GE, 1.0, 0.5)  # load_avg=1.0 on a host at 0.5
    assert not compare(ValueType.DOUBLE, Relop.LE, 1.0, 0.5)
    assert compare(ValueType.INT, Relop.GT, 11, 10)


def test_sge_md_a_malformed_expression_eq_never_ne_always() -> None:
    assert not compare(ValueType.STRING, Relop.EQ, "lx*|", "lx-amd64")
    assert compare(ValueType.STRING, Relop.NE, "lx*|", "lx-amd64")


def test_compare_misuse() -> None:
    with pytest.raises(ValueError, match="not defined for strings"):
        compare(ValueType.STRING, Relop.LE, "a", "b")
    with pytest.raises(TypeError):
        compare(ValueType.INT, Relop.LE, "1", 2.0)
    with pytest.raises(QuantityError):
        compare_text(ValueType.INT, Relop.LE, "one", "2")
    with pytest.raises(ValueError, match="semantics"):
        compare(ValueType.INT, Relop.LE, 1.0, 2.0, semantics="6.2")  # type: ignore[arg-type]


def test_sge_md_d_zero_request_unlimited_slots() -> None:
    assert consumable_slot_capacity(10, 3, 0) is None
    assert consumable_slot_capacity(10, 3, 2) == 3
    assert consumable_slot_capacity(10, 9, 2) == 0
    with pytest.raises(ValueError):
        consumable_fits(Consumable.NO, 1, 0, 1, 1)


# --- values per definition ---------------------------------------------------------------------


def test_parse_value_roles() -> None:
    memory = _definition("MEMORY", "<=", consumable="YES")
    assert parse_value(memory, "2G", role="capacity") == 2 * 1024**3
    with pytest.raises(QuantityError, match="infinity not allowed for consumables"):
        parse_value(memory, "INFINITY", role="capacity")
    assert parse_value(memory, "-1", role="load") == -1  # load reports are taken as they are
    assert parse_value(default_table()["h_vmem"], "INFINITY", role="capacity") == INFINITY
    with pytest.raises(ValueError, match="unknown role"):
        parse_value(memory, "1", role="booking")


def test_sge_md_b_host_values_resolved_unless_expression() -> None:
    host = default_table()["hostname"]
    names = {"node01": "node01.example.org"}
    assert parse_value(host, "node01", resolve_host=names.get) == "node01.example.org"
    assert parse_value(host, "node0*", resolve_host=names.get) == "node0*"
    with pytest.raises(ComplexError, match="can't resolve host 'ghost'"):
        parse_value(host, "ghost", resolve_host=names.get)


def test_normalize_and_format() -> None:
    table = default_table()
    assert normalize_value(table["h_rt"], 5400.9, "1:30:00.9") == "5400"
    assert normalize_value(table["h_rt"], INFINITY, "infinity") == "INFINITY"
    assert normalize_value(table["h_vmem"], 2 * 1024**3, "2048M") == "2048M"
    assert format_value(ValueType.MEMORY, 2 * 1024**3) == "2.000G"
    assert format_value(ValueType.STRING, "lx-amd64") == "lx-amd64"


# --- properties ----------------------------------------------------------------------------

row_strategy = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["a", "lic", "x_1"]),
        "shortcut": st.sampled_from(["s", "lc"]),
        "type": st.sampled_from([t.value for t in ValueType]),
        "relop": st.sampled_from([r.value for r in Relop]),
        "requestable": st.sampled_from(["YES", "NO", "FORCED"]),
        "consumable": st.sampled_from(["YES", "NO", "JOB"]),
        "default": st.sampled_from(["0", "1", "NONE", "1G", "0:0:0", "INFINITY", "-1", "TRUE"]),
        "urgency": st.sampled_from(["0", "1000", "1.5", "x"]),
    }
)


@settings(max_examples=examples(400))
@given(row=row_strategy)
def test_property_definitions_valid_and_round_trip_or_complex_error(row: dict[str, str]) -> None:
    try:
        definition = ComplexDefinition.from_row(row)
    except ComplexError as error:
        assert error.message
    else:
        assert ComplexDefinition.from_line(definition.to_line()) == definition
        if definition.is_consumable:
            assert definition.type.is_numeric
            assert definition.relop in (Relop.LE, Relop.EXCL)
