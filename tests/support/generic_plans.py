"""The generic plan PostgreSQL would use for a statement prepared by psycopg.

psycopg prepares a statement after it has run a few times, and PostgreSQL may then switch
to a generic plan that cannot see the bound values. The plan tests of the pull
(tests/matching/dispatch/test_generic_plans.py) and of allocation
(tests/matching/allocation/test_generic_plans.py) both ask for that plan here, with
``plan_cache_mode = force_generic_plan``, and assert which index it uses.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.engine import Connection

_NAMED = re.compile(r"%\((\w+)\)s")


def generic_plan(
    connection: Connection,
    statement: Any,
    values: dict[str, Any],
    *,
    price_out_scans: bool = True,
) -> str:
    """The generic plan of ``statement`` as psycopg would prepare it, with ``values``
    (only their order and types matter to a generic plan); sequential scans priced out
    unless the caller gave the tables realistic statistics."""
    compiled = statement.compile(dialect=connection.dialect)
    sql = str(compiled)
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    prepared = _NAMED.sub(number, sql)
    parameters = {**compiled.params, **values}
    connection.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
    if price_out_scans:
        connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
    connection.exec_driver_sql(f"PREPARE generic_probe AS {prepared}")
    try:
        arguments = ", ".join(_literal(parameters[name]) for name in order)
        rows = connection.exec_driver_sql(f"EXPLAIN EXECUTE generic_probe({arguments})").scalars()
        return "\n".join(rows)
    finally:
        connection.exec_driver_sql("DEALLOCATE generic_probe")


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"
