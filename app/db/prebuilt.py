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

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import psycopg
from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql.expression import Executable, ReturnsRows

from app.db.loop_pipeline import BEGIN, LoopPipeline, Query, Step

Processor = Callable[[Any], Any] | None


class NotPrebuildableError(ValueError):
    """The statement cannot be compiled once: it renders differently per call (expanding
    or literal-execute parameters), or it needs values SQLAlchemy computes per execution
    (a column's Python-side default or onupdate left out of an INSERT or UPDATE)."""


class MissingParameterError(KeyError):
    """The caller gave no value for a parameter the statement needs (SQLAlchemy would
    refuse it too, rather than send NULL)."""


#: The default of a parameter the caller must give.
_REQUIRED = object()
#: Whether psycopg's libpq can pipeline (libpq 14 and later); without it the statements
#: of :func:`rows_together` go one by one, which is slower but the same.
PIPELINES = psycopg.Pipeline.is_supported()


@dataclass(frozen=True)
class _Compiled:
    sql: str
    #: Every parameter's name, default value (None for one the caller gives) and
    #: conversion to what the driver takes.
    binds: tuple[tuple[str, Any, Processor], ...]
    #: The conversion of each result column to its Python value.
    results: tuple[Processor, ...]
    #: For a driver with positional parameters (SQLite's ``?``, psycopg's raw ``$n``),
    #: their names in order.
    positions: tuple[str, ...] | None
    #: Compiled with ``$n`` placeholders for psycopg's raw cursor (see :func:`_cursor`).
    raw: bool = False

    @cached_property
    def sql_bytes(self) -> bytes:
        """The text as the event loop's pipeline sends it (app/db/loop_pipeline.py)."""
        return self.sql.encode()

    @cached_property
    def converting(self) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
        """The result columns that have a conversion, by position: most have none, and
        a row of a job's 35 columns is converted at these few only."""
        return tuple(
            (index, process) for index, process in enumerate(self.results) if process is not None
        )


class Prebuilt:
    """One Core statement (a SELECT, or DML with RETURNING), compiled at first use on
    each dialect (see the module docstring)."""

    def __init__(self, statement: Executable) -> None:
        if not isinstance(statement, ReturnsRows):
            raise TypeError("a prebuilt statement returns rows")
        self.statement = statement
        self._compiled: dict[str, _Compiled] = {}

    def _compile(self, dialect: Dialect) -> _Compiled:
        raw = dialect.driver == "psycopg"
        if raw:
            # PostgreSQL's own placeholders, for the raw cursor: psycopg converts the
            # ``%(name)s`` of every statement longer than 4,096 characters anew on each
            # execution (it caches shorter ones), 86 microseconds for the pull's take.
            dialect = copy.copy(dialect)
            dialect.paramstyle, dialect.positional = "numeric_dollar", True
        compiled = self.statement.compile(dialect=dialect)
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise NotPrebuildableError("the statement has expanding or literal parameters")
        if compiled.insert_prefetch or compiled.update_prefetch:
            # SQLAlchemy computes those values per execution (a column's Python-side
            # default or onupdate); sent as compiled they would be NULL.
            raise NotPrebuildableError("the statement leaves a column to a Python-side default")
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
        return _Compiled(
            compiled.string, binds, results, tuple(positions) if positions else None, raw
        )

    def _bound(self, dialect: Dialect, params: Mapping[str, Any]) -> tuple[_Compiled, Any]:
        """The compiled form for ``dialect`` and the parameters as the driver takes them."""
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
        return compiled, sent

    def rows(self, connection: Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run the statement in ``connection``'s transaction; its rows, converted."""
        return rows_together(connection, (self, params))[0]


def rows_together(
    connection: Connection, *calls: tuple[Prebuilt, Mapping[str, Any]]
) -> list[list[tuple[Any, ...]]]:
    """Run the statements in order in ``connection``'s transaction; the rows of each.

    With a driver that can pipeline (psycopg over libpq 14 or later, :data:`PIPELINES`)
    they are sent together and their answers read together: one round trip for all of
    them (psycopg still waits for the BEGIN that opens a transaction on its own). The
    server still runs them one after the other, each with the snapshot of its own start
    (under READ COMMITTED), so a later statement sees what an earlier one locked and
    wrote. An error stops the rest, as it would have one by one."""
    dialect = connection.dialect
    bound = [prebuilt._bound(dialect, params) for prebuilt, params in calls]
    driver = connection.connection.driver_connection
    one_by_one = len(bound) == 1 or not PIPELINES
    pipelined = driver if isinstance(driver, psycopg.Connection) and not one_by_one else None
    cursors = [_cursor(connection, compiled) for compiled, _ in bound]
    try:
        try:
            if pipelined is not None:
                with pipelined.pipeline():
                    for cursor, (compiled, sent) in zip(cursors, bound, strict=True):
                        cursor.execute(compiled.sql, sent)
                fetched = [cursor.fetchall() for cursor in cursors]
            else:
                fetched = []
                for cursor, (compiled, sent) in zip(cursors, bound, strict=True):
                    cursor.execute(compiled.sql, sent)
                    fetched.append(cursor.fetchall())
        except dialect.loaded_dbapi.Error as error:
            raise _wrapped(connection, bound, cursors, error) from error
    finally:
        for cursor in cursors:
            cursor.close()
    return [_converted(compiled, rows) for (compiled, _), rows in zip(bound, fetched, strict=True)]


async def rows_together_async(
    pipeline: LoopPipeline,
    dialect: Dialect,
    *calls: tuple[Prebuilt, Mapping[str, Any]],
    begin: bool = False,
) -> list[list[tuple[Any, ...]]]:
    """:func:`rows_together` on the event loop's connection (app/db/event_loop.py), in
    one round trip of ``pipeline`` (app/db/loop_pipeline.py): the same SQL compiled for
    ``dialect`` (the engine's, so the compiled form is shared with the threads' way), the
    same values back. ``begin``: the statements open the transaction, its BEGIN sent in
    the same pipeline (the connection is in autocommit mode, where they would otherwise
    run each in a transaction of its own); else they run in the transaction the
    connection is in. Driver errors are raised as psycopg raises them; the caller owns
    the connection."""
    bound = [prebuilt._bound(dialect, params) for prebuilt, params in calls]
    if not all(compiled.raw for compiled, _ in bound):
        raise NotPrebuildableError("the asyncio way runs statements compiled for psycopg")
    steps: list[Step] = [BEGIN] if begin else []
    steps += [Query(compiled.sql_bytes, sent) for compiled, sent in bound]
    fetched = await pipeline.run(steps)
    if begin:
        fetched = fetched[1:]
    return [_converted(compiled, rows) for (compiled, _), rows in zip(bound, fetched, strict=True)]


def _cursor(connection: Connection, compiled: _Compiled) -> Any:
    """A cursor for the compiled statement: psycopg's raw cursor (which sends the text as
    it is, ``$n`` placeholders and all) for one compiled for it, else the driver's own."""
    if compiled.raw:
        driver: psycopg.Connection[Any] = connection.connection.driver_connection  # type: ignore[assignment]
        return psycopg.RawCursor(driver)
    return connection.connection.cursor()


def _converted(compiled: _Compiled, fetched: Sequence[Any]) -> list[tuple[Any, ...]]:
    converting = compiled.converting
    if not converting:
        return [tuple(row) for row in fetched]
    rows = []
    for row in fetched:
        values = list(row)
        for index, process in converting:
            values[index] = process(values[index])
        rows.append(tuple(values))
    return rows


def _wrapped(
    connection: Connection,
    bound: list[tuple[_Compiled, Any]],
    cursors: list[Any],
    error: Any,
) -> StatementError:
    """The driver's error as SQLAlchemy raises it, after what SQLAlchemy's own handling of
    a lost connection does."""
    dialect = connection.dialect
    lost = dialect.is_disconnect(error, connection.connection.dbapi_connection, cursors[0])
    if lost:
        # Every connection the pool held from before is suspect too (a restarted
        # server), so the pool recycles them at their next checkout, and this one is
        # dropped.
        connection.engine.pool._invalidate(connection.connection, error)
        connection.invalidate(error)
    # Wrapped as SQLAlchemy wraps it, so that the retry and problem handlers
    # (app/db/dialect.py) read a deadlock or a lost connection the same way.
    sql = "; ".join(compiled.sql for compiled, _ in bound)
    sent = bound[0][1] if len(bound) == 1 else None
    wrapped: StatementError = DBAPIError.instance(
        sql,
        sent,
        error,
        dialect.loaded_dbapi.Error,
        connection_invalidated=lost,
        dialect=dialect,
    )
    return wrapped
