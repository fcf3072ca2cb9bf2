"""The rows a Grid Engine decision is made on: queue instances, attribute values and
consumable usage, and the attribute table itself (skipped when the caller already holds
the current one), as statements built once."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Float,
    Integer,
    Select,
    Text,
    bindparam,
    case,
    cast,
    func,
    literal,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.orm import aliased

from app.db.models import Attribute, AttributeValue, ConsumableUsage, Queue, QueueInstance
from app.matching.gridengine.table import table_of_rows, table_rows
from app.notations.gridengine.attribute_table import ComplexTable


def _instance_seq_no(
    qi: type[QueueInstance] = QueueInstance, queue: type[Queue] = Queue
) -> ColumnElement[int]:
    """The instance's seq_no: its own (a per-host value), else its cluster queue's."""
    return func.coalesce(qi.seq_no, queue.seq_no)


def _instance_thresholds(
    qi: type[QueueInstance] = QueueInstance, queue: type[Queue] = Queue
) -> ColumnElement[str]:
    """The instance's load_thresholds: its own (a per-host value), else its queue's."""
    return func.coalesce(qi.load_thresholds, queue.load_thresholds)


def _queue_rows() -> Select[int, int, int, int, str, int, str, str]:
    return select(
        QueueInstance.id,
        QueueInstance.worker_id,
        QueueInstance.slots,
        QueueInstance.used_slots,
        Queue.name,
        _instance_seq_no(),
        _instance_thresholds(),
        cast(QueueInstance.states, Text()),
    ).join(Queue, Queue.id == QueueInstance.queue_id)


def _seen_by_matching() -> ColumnElement[bool]:
    """The value rows decisions read: the effective ones. A reported load value that an
    administrator's load value of the attribute hides is left out, so that an object has
    one load value per attribute; the rows a configured value beats for ``==``/``!=``
    (the only other ineffective ones) the evaluator's merge would ignore anyway."""
    return AttributeValue.effective.expression


def _value_rows() -> Select[str, int, str, str, str]:
    return (
        select(
            AttributeValue.level,
            AttributeValue.object_key,
            AttributeValue.kind,
            AttributeValue.text,
            Attribute.name,
        )
        .join(Attribute, Attribute.id == AttributeValue.attribute_id)
        .where(_seen_by_matching())
    )


def _usage_rows() -> Select[int, str, int, float, float, str]:
    return select(
        ConsumableUsage.id,
        ConsumableUsage.level,
        ConsumableUsage.object_key,
        ConsumableUsage.used,
        ConsumableUsage.used_nonexclusive,
        Attribute.name,
    ).join(Attribute, Attribute.id == ConsumableUsage.attribute_id)


#: The attribute table last read by a pull, with its digest (see :func:`_table_digest`).
_KNOWN_TABLE: tuple[str, ComplexTable] | None = None


def table_parameters() -> dict[str, Any]:
    """The parameters of :func:`worker_row_parts` ``with_table``: the digest of the table
    this process knows, so that the statement sends the table's rows only when the
    table has changed (71 rows of 9 columns were a fifth of a pull's Python time)."""
    return {"sge_known_table": None if _KNOWN_TABLE is None else _KNOWN_TABLE[0]}


def _table_of_parts(digest: str | None, attributes: list[Any]) -> ComplexTable:
    """The table of a state statement's rows: the known one when the digest (part 5) is
    the known digest, else the one its rows (part 3) give, which becomes the known one.
    The digest and the rows come from one statement, so they agree."""
    global _KNOWN_TABLE
    known = _KNOWN_TABLE
    if not attributes and digest is not None and known is not None and known[0] == digest:
        return known[1]
    attributes.sort(key=lambda row: row.i1)
    table = table_of_rows(
        (r.s1, r.s2, r.s3, r.s4, r.s5, r.s6, r.s7, r.f1, bool(r.i2)) for r in attributes
    )
    if digest is not None:
        _KNOWN_TABLE = (digest, table)
    return table


def _table_digest() -> ColumnElement[str]:
    """Every column of every attribute row in one text, rows in no particular order:
    equal texts are equal tables (names, shortcuts and keywords cannot hold the
    separators, and no column is NULL). A changed row order only costs one reading of
    the rows. The urgency's text may round on SQLite; it decides nothing in a pull."""
    columns = table_rows()
    separator = literal("\x1f", Text())
    text: ColumnElement[Any] = columns[0]
    for column in columns[1:]:
        # || converts numbers and booleans to text on both databases.
        text = text.op("||", return_type=Text())(separator).op("||", return_type=Text())(column)
    return func.aggregate_strings(text, "\x1e")


_ROW_TYPES: dict[str, Any] = {
    **{f"i{n}": Integer() for n in range(1, 6)},
    "f1": Float(),
    "f2": Float(),
    **{f"s{n}": Text() for n in range(1, 8)},
}


def row_columns(**given: Any) -> list[ColumnElement[Any]]:
    """The columns i1..i5, f1, f2, s1..s7 of a part of :func:`worker_row_parts` other
    than the first: the given expressions, untyped NULLs in the others (the database
    takes a column's type from the parts that have one, and the statement stays under
    psycopg's 4,096 characters, beyond which it is parsed again on every run)."""
    return [given.get(name, null()).label(name) for name in _ROW_TYPES]


def _first_row_columns(**given: Any) -> list[ColumnElement[Any]]:
    """:func:`row_columns` of the UNION's first part: its NULLs typed."""
    return [given.get(name, cast(null(), kind)).label(name) for name, kind in _ROW_TYPES.items()]


@lru_cache(maxsize=2)
def _worker_rows(*, with_table: bool) -> CompoundSelect[Any]:
    return union_all(*worker_row_parts(with_table=with_table))


@lru_cache(maxsize=2)
def worker_row_parts(*, with_table: bool) -> tuple[Select[Any], ...]:
    """Queue instances (part 0), values (1) and consumable rows (2) of the global host
    and the workers in the parameter ``sge_worker_ids``, and with ``with_table`` the
    attribute table's digest (5) and, when it differs from the parameter
    ``sge_known_table`` (:func:`table_parameters`), its rows (3, i1 their order by name
    as the database sorts), for one UNION ALL
    with typed NULLs in the unused columns: part, i1..i5, f1, f2, s1..s7 (see
    :func:`row_columns`). Built once (building it cost more than a pull's evaluation)."""
    worker_ids: BindParameter[int] = bindparam("sge_worker_ids", expanding=True)
    # Short aliases: the pull's statement must stay under psycopg's 4,096 characters.
    qi, queue = aliased(QueueInstance, name="qi"), aliased(Queue, name="q")
    queues = (
        select(
            literal(0).label("part"),
            *_first_row_columns(
                i1=qi.id,
                i2=qi.worker_id,
                i3=qi.slots,
                i4=qi.used_slots,
                i5=_instance_seq_no(qi, queue),
                s1=cast(queue.name, Text()),
                s2=_instance_thresholds(qi, queue),
                s3=qi.states,
            ),
        )
        .join(queue, queue.id == qi.queue_id)
        .where(qi.worker_id.in_(worker_ids))
    )
    values = _rows_at_objects(
        1,
        AttributeValue,
        worker_ids,
        s2=cast(AttributeValue.kind, Text()),
        s3=AttributeValue.text,
    ).where(_seen_by_matching())
    usage = _rows_at_objects(
        2,
        ConsumableUsage,
        worker_ids,
        i1=ConsumableUsage.id,
        f1=ConsumableUsage.used,
        f2=ConsumableUsage.used_nonexclusive,
    )
    if not with_table:
        return queues, values, usage
    return queues, values, usage, *_table_parts()


def _rows_at_objects(
    part: int,
    model: type[AttributeValue] | type[ConsumableUsage],
    worker_ids: BindParameter[int],
    **given: Any,
) -> Select[Any]:
    """Part ``part`` of :func:`worker_row_parts`: ``model``'s rows of the global host and
    of the workers ``worker_ids``, each with its object key (i2), level (s1) and attribute
    name (s4) besides the ``given`` columns."""
    return (
        select(
            literal(part).label("part"),
            *row_columns(
                i2=model.object_key,
                s1=cast(model.level, Text()),
                s4=cast(Attribute.name, Text()),
                **given,
            ),
        )
        .join(Attribute, Attribute.id == model.attribute_id)
        # Global rows are exactly those without a worker (CHECK object_matches_level):
        # "worker_id IS NULL" uses the worker index, while "level = 'global'" as a
        # parameter of a prepared statement's generic plan is estimated at a third of the
        # table (and scanned it).
        .where(or_(model.worker_id.is_(None), model.worker_id.in_(worker_ids)))
    )


def _table_parts() -> tuple[Select[Any], Select[Any]]:
    """The attribute table's rows (part 3), sent only when its digest differs from the
    parameter ``sge_known_table``, and the digest itself (part 5), for
    :func:`worker_row_parts`."""
    digest = select(_table_digest().label("digest")).cte("sge_table_digest")
    changed = (
        select(digest.c.digest)
        .scalar_subquery()
        .is_distinct_from(bindparam("sge_known_table", type_=Text()))
    )
    name, shortcut, kind, relop, requestable, consumable, default, urgency, builtin = table_rows()
    attributes = select(
        literal(3).label("part"),
        *row_columns(
            i1=func.row_number().over(order_by=name),
            i2=case((builtin, 1), else_=0),
            f1=urgency,
            **{
                f"s{n}": cast(column, Text())
                for n, column in enumerate(
                    (name, shortcut, kind, relop, requestable, consumable, default), start=1
                )
            },
        ),
    )
    return (
        attributes.where(changed),
        select(literal(5).label("part"), *row_columns(s1=digest.c.digest)),
    )
