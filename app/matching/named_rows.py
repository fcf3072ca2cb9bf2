"""Rows people name (workers, complex attributes, parallel environments, resource quota
sets, task types): one of them by its unique name, and a page of them in name order, the
two statements every family that keeps such rows would otherwise write again."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from app.db.base import Base
from app.matching.errors import NotFoundError

#: A mapped class whose table has a unique ``name`` column.
NamedRow = TypeVar("NamedRow", bound=Base)


def _name(model: type[Base]) -> ColumnElement[Any]:
    return model.__table__.c.name


def row_by_name(
    session: Session, model: type[NamedRow], name: str, *, missing: str, lock: bool = False
) -> NamedRow:
    """The ``model`` row named ``name`` (locked FOR UPDATE when ``lock``); NotFoundError
    saying ``missing`` when there is none."""
    statement = select(model).where(_name(model) == name)
    if lock:
        statement = statement.with_for_update()
    row = session.scalar(statement)
    if row is None:
        raise NotFoundError(missing)
    return row


def rows_by_name(
    session: Session, model: type[NamedRow], *, limit: int | None, offset: int
) -> list[NamedRow]:
    """A page of ``model`` rows in name order (``limit`` None: all of them from ``offset``)."""
    return list(session.scalars(select(model).order_by(_name(model)).limit(limit).offset(offset)))
