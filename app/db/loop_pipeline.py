"""Statements pipelined on an asyncio psycopg connection by driving its libpq connection
directly: the express lane's round trips without psycopg's cursor and pipeline layers.

psycopg's asyncio pipeline runs every message through Python generators, cursors and its
own prepared-statement bookkeeping. For the express lane, whose requests are a handful of
prebuilt statements each, that was most of the event loop's CPU per request (issue 38):
a BEGIN, two prepared statements and a COMMIT cost 263-273 µs of client CPU through
psycopg's pipeline and 60 µs here, sent the same way (one libpq pipeline, one sync).
What stays psycopg's: the connection, libpq itself (psycopg's C binding), and the
adaptation of values both ways (its C ``Transformer``, with the connection's adapters),
so the rows are the ones psycopg's cursors give.

A :class:`LoopPipeline` belongs to one connection and to one task at a time (the event
loop's pool hands each connection to one transaction). Statements are prepared on the
connection on first use, under names of this module's own, one per text and parameter
types, and kept for the connection's life; a prepare the server did not answer (an
earlier statement of its pipeline failed) is sent again next time, and a statement a
migration made stale closes its connection. Between two
:meth:`LoopPipeline.run` the connection is out of pipeline mode, so psycopg's own methods
(``execute``, ``rollback``) serve it as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors, pq
from psycopg.adapt import PyFormat, Transformer

#: How many statements one connection keeps prepared; past it the rest run unnamed
#: (parsed and planned each time), so that no run of distinct texts can grow it.
MAX_PREPARED = 256
#: Each parameter as psycopg chooses its format (text or binary) by its type.
_AUTO = PyFormat.AUTO
#: SQLSTATEs that say a prepared statement no longer stands for its text (a migration
#: changed a table under it, or the statement is gone): the connection is closed, and
#: the pool's next one prepares its statements anew.
_STALE = frozenset({"0A000", "26000"})


@dataclass(frozen=True)
class Command:
    """A statement sent as it is, with no parameters and no rows (BEGIN, COMMIT)."""

    sql: bytes


@dataclass(frozen=True)
class Query:
    """A statement with ``$n`` parameters: prepared on the connection on first use."""

    sql: bytes
    params: Sequence[Any]


Step = Command | Query

BEGIN = Command(b"BEGIN")
COMMIT = Command(b"COMMIT")
ROLLBACK = Command(b"ROLLBACK")


class LoopPipeline:
    """One connection's pipelined round trips (see the module docstring)."""

    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self.connection = connection
        self._pgconn = connection.pgconn
        self._transformer = Transformer(connection)
        #: Statement name by (text, parameter types).
        self._prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        self._names = 0

    async def run(self, steps: Sequence[Step]) -> list[list[tuple[Any, ...]]]:
        """Send the steps in one pipeline with one sync, wait for their answers; the rows
        of each (none for a command). The first error the server answered is raised as
        psycopg raises it (the steps after it did not run); a connection that failed
        raises psycopg's OperationalError. Whatever stops the round trip before its
        answers are read (a cancelled task, a value psycopg cannot dump) closes the
        connection, which the pool then drops."""
        pgconn = self._pgconn
        done = False
        try:
            pgconn.enter_pipeline_mode()
            queued, rows_of = self._send(steps)
            pgconn.pipeline_sync()
            results = await self._answers()
            pgconn.exit_pipeline_mode()
            done = True
        finally:
            if not done:
                pgconn.finish()
        for position, (key, name) in queued.items():
            if results[position].status == pq.ExecStatus.COMMAND_OK:
                self._prepared[key] = name
        rows: list[list[tuple[Any, ...]]] = [[] for _ in steps]
        transformer = self._transformer
        for result, index in zip(results, rows_of, strict=True):
            status = result.status
            if status == pq.ExecStatus.FATAL_ERROR:
                error = errors.error_from_result(result, encoding=self.connection.info.encoding)
                if error.sqlstate in _STALE:
                    # Preparing them again here would leave the old names on the server.
                    pgconn.finish()
                raise error
            if index is not None and status == pq.ExecStatus.TUPLES_OK:
                transformer.set_pgresult(result)
                rows[index] = transformer.load_rows(0, result.ntuples, tuple)
        return rows

    def _send(
        self, steps: Sequence[Step]
    ) -> tuple[dict[int, tuple[tuple[bytes, tuple[int, ...]], bytes]], list[int | None]]:
        """Queue the steps (and the prepares they need first); the prepares sent, by the
        position of their answer, and for each answer the step whose rows it holds (None
        for a prepare's)."""
        pgconn = self._pgconn
        transformer = self._transformer
        queued: dict[int, tuple[tuple[bytes, tuple[int, ...]], bytes]] = {}
        names: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        rows_of: list[int | None] = []
        for index, step in enumerate(steps):
            if isinstance(step, Command):
                pgconn.send_query_params(step.sql, None)
                rows_of.append(index)
                continue
            values = transformer.dump_sequence(step.params, [_AUTO] * len(step.params))
            types = tuple(transformer.types or ())
            key = (step.sql, types)
            name = self._prepared.get(key) or names.get(key)
            if name is None and len(self._prepared) + len(names) < MAX_PREPARED:
                name = names[key] = self._new_name()
                pgconn.send_prepare(name, step.sql, types)
                queued[len(rows_of)] = (key, name)
                rows_of.append(None)
            if name is None:
                pgconn.send_query_params(step.sql, values, types, transformer.formats)
            else:
                pgconn.send_query_prepared(name, values, transformer.formats)
            rows_of.append(index)
        return queued, rows_of

    def _new_name(self) -> bytes:
        self._names += 1
        return b"jm_loop_%d" % self._names

    async def _answers(self) -> list[pq.abc.PGresult]:
        """Every answer up to the pipeline's sync, in order (the sync's own left out)."""
        pgconn = self._pgconn
        while pgconn.flush():
            await _ready(pgconn.socket, write=True)
        results: list[pq.abc.PGresult] = []
        while True:
            await _ready(pgconn.socket, write=False)
            pgconn.consume_input()
            while not pgconn.is_busy():
                result = pgconn.get_result()
                if result is None:
                    continue  # the end of one statement's answers
                if result.status == pq.ExecStatus.PIPELINE_SYNC:
                    return results
                results.append(result)


async def _ready(socket: int, *, write: bool) -> None:
    """Wait until libpq's socket can be read (or written)."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    if write:
        loop.add_writer(socket, _wake, ready)
    else:
        loop.add_reader(socket, _wake, ready)
    try:
        await ready
    finally:
        if write:
            loop.remove_writer(socket)
        else:
            loop.remove_reader(socket)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
