"""The built-in attribute table (app/notations/gridengine/default_table.py and default_table()):
every row of the vector file vectors/sge/complex_defaults.jsonl builds, round-trips and
equals the module's copy; the table has the 51 rows of Grid Engine 6.2u5's default complex
(46 in 6.0's, which lacks the topology attributes such as m_topology) and only ``slots``
is a consumable with an urgency.

Sources: complex(5), the centry files of Grid Engine 6.2u5 (each vector row's ``source``
field names its file), docs/notations/gridengine.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.notations.gridengine.attribute_table import BUILTIN_NAMES, default_table
from app.notations.gridengine.default_table import DEFAULT_COMPLEX_ROWS
from app.notations.gridengine.definitions import ComplexDefinition
from app.notations.quantities import ValueType
from tests.vectors import sge_rows

DEFAULT_ROWS = sge_rows("complex_defaults.jsonl")


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=f"complex_defaults.jsonl:{n}:{r['name']}") for n, r in DEFAULT_ROWS]
)
def test_complex_defaults_vector_row_builds_and_round_trips(row: dict[str, Any]) -> None:
    definition = ComplexDefinition.from_row(row)
    assert definition.name == row["name"]
    assert definition.shortcut == row["shortcut"]
    assert definition.type is ValueType[row["type"]]
    assert definition.relop.value == row["relop"]
    assert definition.requestable.value == row["requestable"]
    assert definition.consumable.value == row["consumable"]
    assert definition.default == row["default"]
    assert definition.urgency == row["urgency"]
    assert ComplexDefinition.from_line(definition.to_line()) == definition
    assert ComplexDefinition.from_row(definition.to_row()) == definition
    assert default_table()[row["shortcut"]] == definition


def test_complex_defaults_module_copy_equals_the_vector_file() -> None:
    keys = [k for k in DEFAULT_COMPLEX_ROWS[0]]
    assert [dict(r) for r in DEFAULT_COMPLEX_ROWS] == [
        {k: row[k] for k in keys} for _, row in DEFAULT_ROWS
    ]


def test_sge_md_h_default_table_has_51_rows_and_46_in_sge60() -> None:
    assert len(default_table()) == 51
    sge60 = default_table(sge60=True)
    assert len(sge60) == 46
    assert "m_topology" not in sge60 and "topo" not in sge60
    assert {d.name for d in default_table()} == BUILTIN_NAMES


def test_sge_md_h_only_slots_has_urgency_and_a_default() -> None:
    table = default_table()
    assert [d.name for d in table if d.urgency] == ["slots"]
    assert [d.name for d in table if d.is_consumable] == ["slots"]
    assert table["slots"].default_value == 1
