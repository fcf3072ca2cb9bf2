"""The complex attribute table in the database: reading it as a ComplexTable, and the admin
changes (add, change, delete) under Grid Engine's rules
(docs/notations/gridengine.md#the-attribute-table); a change's consequences for stored
values and misfit rows are app/matching/gridengine/admin.py's.

Rules beyond a single row's validity (app/notations/gridengine/attribute_table.py): names and
shortcuts are unique across both columns; a built-in attribute cannot be deleted and keeps its type
(the string family may switch among itself); an attribute that has values or requests
cannot be deleted, nor change its type or consumable kind. A change of relop or string
type changes how stored values compare, so the rows are re-normalised and every worker's
misfit rows are recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, insert, select
from sqlalchemy.orm import Session

from app.db.models import Attribute, AttributeValue, CategoryRequest
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.named_rows import row_by_name, rows_by_name
from app.notations.gridengine.attribute_table import ComplexTable, default_table
from app.notations.gridengine.definitions import STRING_FAMILY, ComplexDefinition, ComplexError
from app.notations.quantities import ValueType

_COLUMNS = ("name", "shortcut", "type", "relop", "requestable", "consumable", "default", "urgency")

RowKey = tuple[tuple[str, str, str, str, str, str, str, float, bool], ...]


_ROW_COLUMNS = (
    Attribute.name,
    Attribute.shortcut,
    Attribute.type,
    Attribute.relop,
    Attribute.requestable,
    Attribute.consumable,
    Attribute.default,
    Attribute.urgency,
    Attribute.builtin,
)

#: session.info key: (root transaction, rows) read by :func:`prefetch_table`.
_PREFETCHED = "jobmatch.complex_table.prefetched"


def _row_key(session: Session) -> RowKey:
    rows = session.execute(select(*_ROW_COLUMNS).order_by(Attribute.name)).all()
    return tuple(tuple(row) for row in rows)  # type: ignore[misc]


def prefetch_table(session: Session, flag: ColumnElement[bool]) -> bool | None:
    """Evaluate ``flag`` (an uncorrelated condition) in the statement that reads the
    attribute table, and keep the rows for the next :func:`load_table` of this
    transaction: a pull asks whether the worker has complex values and then needs the
    table, one round trip instead of two. None when the table is empty."""
    rows = session.execute(select(*_ROW_COLUMNS, flag.label("flag")).order_by(Attribute.name)).all()
    if not rows:
        return None
    key = tuple(tuple(row)[:-1] for row in rows)
    session.info[_PREFETCHED] = (session.get_transaction(), key)
    return bool(rows[0][-1])


@lru_cache(maxsize=64)
def _table_of(key: RowKey) -> ComplexTable:
    definitions = []
    builtin = []
    for name, shortcut, kind, relop, requestable, consumable, default, urgency, is_builtin in key:
        definitions.append(
            ComplexDefinition.from_row(
                {
                    "name": name,
                    "shortcut": shortcut,
                    "type": kind,
                    "relop": relop,
                    "requestable": requestable,
                    "consumable": consumable,
                    "default": default,
                    "urgency": urgency,
                }
            )
        )
        if is_builtin:
            builtin.append(name)
    return ComplexTable(tuple(definitions), builtin_names=frozenset(builtin))


def table_rows() -> tuple[Any, ...]:
    """The columns :func:`table_of_rows` expects, for a caller that reads the table in
    one of its own statements."""
    return _ROW_COLUMNS


def table_of_rows(rows: Iterable[Sequence[Any]]) -> ComplexTable:
    """The table of attribute rows read with :func:`table_rows`, in name order as the
    database sorts (the same rows give the same table object as :func:`load_table`)."""
    return _table_of(tuple(tuple(row) for row in rows))


def load_table(session: Session) -> ComplexTable:
    """The current attribute table (parsed once per distinct content). Rows read by
    :func:`prefetch_table` in this transaction serve once (a pull's next statements do
    not change the table; a later caller reads it again)."""
    prefetched = session.info.pop(_PREFETCHED, None)
    if prefetched is not None and prefetched[0] is session.get_transaction():
        return _table_of(prefetched[1])
    return _table_of(_row_key(session))


def attribute_ids(session: Session) -> dict[str, int]:
    return {name: id_ for id_, name in session.execute(select(Attribute.id, Attribute.name))}


def definition_from_body(body: Mapping[str, object]) -> ComplexDefinition:
    """A definition from an API body; errors name the column as the field."""
    try:
        return ComplexDefinition.from_row(body)
    except ComplexError as error:
        field = next((c for c in _COLUMNS if c in error.message), "attribute")
        raise InvalidFieldError(field, error.message, error) from error


def _default_number(definition: ComplexDefinition) -> float | None:
    value = definition.default_value
    return value if isinstance(value, float) else None


def _check_unique(session: Session, definition: ComplexDefinition, own_id: int | None) -> None:
    words = {definition.name, definition.shortcut}
    clash = session.execute(
        select(Attribute.name).where(
            (Attribute.name.in_(words)) | (Attribute.shortcut.in_(words)),
            Attribute.id != (own_id if own_id is not None else -1),
        )
    ).first()
    if clash is not None:
        raise ConflictError(
            f"name or shortcut of {definition.name!r} is already used by attribute {clash[0]!r}"
        )


def _in_use(session: Session, attribute_id: int) -> bool:
    return bool(
        session.scalar(
            select(
                exists().where(AttributeValue.attribute_id == attribute_id)
                | exists().where(CategoryRequest.attribute_id == attribute_id)
            )
        )
    )


def get_attribute(session: Session, name: str) -> Attribute:
    return row_by_name(session, Attribute, name, missing=f"no attribute named {name!r}")


def list_attributes(
    session: Session, *, limit: int | None = None, offset: int = 0
) -> list[Attribute]:
    """The attribute table by name (``limit`` None: all of it)."""
    return rows_by_name(session, Attribute, limit=limit, offset=offset)


def create_attribute(session: Session, definition: ComplexDefinition) -> Attribute:
    _check_unique(session, definition, None)
    attribute = Attribute(builtin=False, default_number=_default_number(definition))
    _assign(attribute, definition)
    session.add(attribute)
    session.flush()
    return attribute


def _assign(attribute: Attribute, definition: ComplexDefinition) -> None:
    attribute.name = definition.name
    attribute.shortcut = definition.shortcut
    attribute.type = definition.type.value
    attribute.relop = definition.relop.value
    attribute.requestable = definition.requestable.value
    attribute.consumable = definition.consumable.value
    attribute.default = definition.default
    attribute.default_number = _default_number(definition)
    attribute.urgency = definition.urgency


def update_attribute(
    session: Session, name: str, definition: ComplexDefinition
) -> tuple[Attribute, bool]:
    """Replace attribute ``name`` by ``definition`` (the name itself cannot change).
    Also returns whether the attribute's stored values and requests must be re-normalised
    (it is in use and compares differently now): app/matching/gridengine/admin.py does
    that, with the misfit recache it implies."""
    attribute = get_attribute(session, name)
    if definition.name != name:
        raise InvalidFieldError("name", "an attribute cannot be renamed; delete and add it")
    _check_unique(session, definition, attribute.id)
    old_type = ValueType.parse(attribute.type)
    type_changed = old_type is not definition.type
    within_strings = old_type in STRING_FAMILY and definition.type in STRING_FAMILY
    if attribute.builtin and type_changed and not within_strings:
        raise InvalidFieldError(
            "type",
            f"the type of built-in attribute {name!r} cannot change from {old_type.value} "
            f"to {definition.type.value}",
        )
    in_use = _in_use(session, attribute.id)
    if in_use and (
        (type_changed and not within_strings) or attribute.consumable != definition.consumable.value
    ):
        raise ConflictError(
            f"attribute {name!r} has values or requests; its type and consumable kind stay"
        )
    compare_changed = type_changed or attribute.relop != definition.relop.value
    _assign(attribute, definition)
    session.flush()
    return attribute, in_use and compare_changed


def delete_attribute(session: Session, name: str) -> None:
    attribute = get_attribute(session, name)
    if attribute.builtin:
        raise ConflictError(f"built-in attribute {name!r} cannot be deleted")
    if _in_use(session, attribute.id):
        raise ConflictError(f"attribute {name!r} has values or requests; remove them first")
    session.delete(attribute)
    session.flush()


def default_attribute_rows() -> list[dict[str, object]]:
    """Rows of the 6.2u5 default table as the migration seeds them."""
    return [
        {
            "name": d.name,
            "shortcut": d.shortcut,
            "type": d.type.value,
            "relop": d.relop.value,
            "requestable": d.requestable.value,
            "consumable": d.consumable.value,
            "default": d.default,
            "default_number": _default_number(d),
            "urgency": d.urgency,
            "builtin": True,
        }
        for d in default_table()
    ]


def reset_attributes(session: Session) -> None:
    """Back to the seeded default table (for tests and scenario runs on a used database);
    every value and request must be gone already."""
    session.execute(delete(Attribute))
    session.execute(insert(Attribute), default_attribute_rows())
    session.flush()
