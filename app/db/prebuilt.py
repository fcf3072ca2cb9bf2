"""Statements built once, compiled once per dialect, and run on the driver's cursor.

SQLAlchemy's execution of a statement it has compiled before still costs, per run, a
lookup of the compiled form by the statement's cache key (a hash over the whole
expression tree: the pull's one statement is 4,500 characters of SQL), an execution
context, result metadata and, for ORM statements, the set-up of an entity loader. For the
two statements of a pull and the two of a finish that was more Python than the driver's
own work (issue 23; ``bench/http_floor.py``). :class:`Prebuilt` keeps the compiled text
and the type conversions of a Core statement and runs it on the cursor of a connection
SQLAlchemy checked out, in the transaction that connection is in: the same SQL, the same
parameters as SQLAlchemy would send them, the same values back.

Only statements without expanding parameters (``IN`` lists rendered per call) qualify;
:class:`Prebuilt` refuses others when it compiles them. A lost connection met here is
invalidated as SQLAlchemy would invalidate it, so that the pool never hands it out again,
and every driver error is raised wrapped as SQLAlchemy raises it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import Executable, ReturnsRows

Processor = Callable[[Any], Any] | None


class NotPrebuildableError(ValueError):
    """The statement renders differently per call (expanding or literal-execute
    parameters), so its text cannot be compiled once."""


class MissingParameterError(KeyError):
    """The caller gave no value for a parameter the statement needs (SQLAlchemy would
    refuse it too, rather than send NULL)."""


#: The default of a parameter the caller must give.
_REQUIRED = object()


@dataclass(frozen=True)
class _Compiled:
    sql: str
    #: Every parameter's name, default value (None for one the caller gives) and
    #: conversion to what the driver takes.
    binds: tuple[tuple[str, Any, Processor], ...]
    #: The conversion of each result column to its Python value.
    results: tuple[Processor, ...]
    #: For a driver with positional parameters (SQLite's ``?``), their names in order.
    positions: tuple[str, ...] | None


class Prebuilt:
    """One Core statement (a SELECT, or DML with RETURNING), compiled at first use on
    each dialect (see the module docstring)."""

    def __init__(self, statement: Executable) -> None:
        if not isinstance(statement, ReturnsRows):
            raise TypeError("a prebuilt statement returns rows")
        self.statement = statement
        self._compiled: dict[str, _Compiled] = {}

    def _compile(self, dialect: Dialect) -> _Compiled:
        compiled = self.statement.compile(dialect=dialect)
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise NotPrebuildableError("the statement has expanding or literal parameters")
        if getattr(compiled, "escaped_bind_names", None):
            raise NotPrebuildableError("the statement has parameter names the driver escapes")
        # Each parameter once by the name the SQL gives it; a constant of the statement
        # (an anonymous parameter) carries its value, the caller gives the others.
        by_name = {name: bind for bind, name in compiled.bind_names.items()}
        binds = tuple(
            (
                name,
                _REQUIRED if bind.required else bind.effective_value,
                bind.type.bind_processor(dialect),
            )
            for name, bind in by_name.items()
        )
        results = tuple(
            column.type.result_processor(dialect, None)
            for column in self.statement.exported_columns
        )
        positions = compiled.positiontup
        return _Compiled(compiled.string, binds, results, tuple(positions) if positions else None)

    def rows(self, connection: Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run the statement in ``connection``'s transaction; its rows, converted."""
        dialect = connection.dialect
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled.setdefault(dialect.name, self._compile(dialect))
        values = {}
        for name, default, process in compiled.binds:
            value = params.get(name, default)
            if value is _REQUIRED:
                raise MissingParameterError(f"no value for the parameter {name!r}")
            values[name] = process(value) if process is not None else value
        sent: Any = values
        if compiled.positions is not None:
            sent = tuple(values[name] for name in compiled.positions)
        cursor = connection.connection.cursor()
        try:
            cursor.execute(compiled.sql, sent)
            fetched = cursor.fetchall()
        except dialect.loaded_dbapi.Error as error:
            lost = dialect.is_disconnect(error, connection.connection.dbapi_connection, cursor)
            if lost:
                # What SQLAlchemy's own handling of a disconnect does: every connection
                # the pool held from before is suspect too (a restarted server), so the
                # pool recycles them at their next checkout, and this one is dropped.
                connection.engine.pool._invalidate(connection.connection, error)
                connection.invalidate(error)
            # Wrapped as SQLAlchemy wraps it, so that the retry and problem handlers
            # (app/db/dialect.py) read a deadlock or a lost connection the same way.
            raise DBAPIError.instance(
                compiled.sql,
                sent,
                error,
                dialect.loaded_dbapi.Error,
                connection_invalidated=lost,
                dialect=dialect,
            ) from error
        finally:
            cursor.close()
        if not any(compiled.results):
            return [tuple(row) for row in fetched]
        return [
            tuple(
                process(value) if process is not None else value
                for value, process in zip(row, compiled.results, strict=True)
            )
            for row in fetched
        ]
