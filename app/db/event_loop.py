"""PostgreSQL connections for the event loop itself: the express lane's pull and finish
without the hop to the thread pool (issue 23).

Every other request runs its transaction in a thread, on SQLAlchemy's pool. For the two
requests a busy farm sends most, that hop and SQLAlchemy's connection handling around
two prebuilt statements were about a third of the server's CPU per pull+finish
(``bench/http_floor.py``: 2.8 ms of server CPU per job through the threads, 1.9 ms on
the loop). Here they run on psycopg's asyncio connection, from a small pool of this
module's own, while the loop goes on serving other requests between round trips.

The pool serves only where it can:

* PostgreSQL over psycopg, not behind a transaction pooler (behind one, JIT is turned
  off per transaction by the threads' engine, app/db/dialect.py, and prepared
  statements are off): :meth:`EventLoopConnections.for_database` gives None otherwise;
* in the one event loop the application's lifespan bound it to (:meth:`bind`), and
  only between its start and its end (:meth:`close`): a test client that runs each
  request in a loop of its own, or an app without a lifespan, takes the threads' way.

A connection that failed, or that a cancelled task left mid-transaction, is closed and
never handed out again. A COMMIT that failed raises :class:`CommitOutcomeUnknownError`
wrapped as SQLAlchemy wraps driver errors and marked as the engine marks a failed
COMMIT (:data:`app.db.dialect.COMMIT_OUTCOME_UNKNOWN`): nobody knows whether it was
stored, so it must not run again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from app.db import dialect, notify
from app.db.engine import Database
from app.db.prebuilt import PIPELINES


class CommitOutcomeUnknownError(DBAPIError):
    """The COMMIT of a transaction on the event loop failed (the connection died or the
    server refused it): whether its writes were stored is unknown."""


#: How the event loop's connections name themselves in ``pg_stat_activity`` (unless the
#: database URL names its connections itself).
APPLICATION_NAME = "jobmatch-event-loop"


@dataclass
class LoopTransaction:
    """One transaction on the event loop's connection: the connection, the dialect its
    statements are compiled for (the engine's), and ``info``, where its announcements
    wait for the COMMIT as on a Session (app/db/notify.py)."""

    connection: psycopg.AsyncConnection[Any]
    dialect: Dialect
    info: dict[str, Any] = field(default_factory=dict)


class EventLoopConnections:
    """A bounded pool of psycopg asyncio connections for one event loop (see the module
    docstring)."""

    def __init__(self, connect_args: tuple[Any, ...], connect_params: dict[str, Any], size: int):
        self._connect_args = connect_args
        self._connect_params = connect_params
        self.size = size
        #: The engine's dialect: statements are compiled for it once, for both ways.
        self.dialect: Dialect | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[psycopg.AsyncConnection[Any]] = []

    @classmethod
    def for_database(cls, database: Database) -> EventLoopConnections | None:
        """A pool for ``database``'s server, or None where the event loop's way does not
        apply (see the module docstring)."""
        engine = database.engine
        if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg":
            return None
        if database.options.behind_pooler or not PIPELINES:
            return None
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        arguments = dialect.engine_arguments(database.url, busy_timeout=0, options=database.options)
        connect_params = {
            "application_name": APPLICATION_NAME,
            **cparams,
            **arguments["connect_args"],
        }
        pool = cls(tuple(cargs), connect_params, database.options.pool_size)
        pool.dialect = engine.dialect
        return pool

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve in ``loop`` from now on (the application's lifespan calls this)."""
        self._loop = loop
        self._slots = asyncio.Semaphore(self.size)

    def usable(self) -> bool:
        """Whether the calling task may use the pool: it runs in the loop the pool is
        bound to."""
        if self._loop is None:
            return False
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    async def close(self) -> None:
        """Stop serving and close the idle connections (at the lifespan's end)."""
        self._loop = None
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[LoopTransaction]:
        """A connection inside one transaction: committed when the block ends normally,
        after the announcements left for the commit were sent, and rolled back when it
        raises. A driver error is raised wrapped as SQLAlchemy wraps it (so that
        :func:`app.db.dialect.is_retryable_error` judges it alike); see the module
        docstring for a failed COMMIT."""
        if self.dialect is None:
            raise RuntimeError("the pool has no dialect to compile statements for")
        connection = await self._acquire()
        transaction = LoopTransaction(connection, self.dialect)
        reusable = False
        try:
            body_done = False
            try:
                async with connection.transaction():
                    yield transaction
                    await notify.send_pending_async(transaction)
                    body_done = True
            except psycopg.Error as error:
                if body_done:
                    raise _outcome_unknown(error) from error
                raise DBAPIError.instance(
                    None, None, error, psycopg.Error, connection_invalidated=connection.broken
                ) from error
            reusable = True
        except BaseException:
            # Rolled back (or its COMMIT answered): reusable if it says so itself. A task
            # cancelled mid-statement leaves it busy, and it is closed.
            reusable = not connection.broken and (
                connection.info.transaction_status == pq.TransactionStatus.IDLE
            )
            raise
        finally:
            self._release(connection, reusable)

    async def _acquire(self) -> psycopg.AsyncConnection[Any]:
        if self._slots is None:
            raise RuntimeError("the pool serves only between bind() and close()")
        await self._slots.acquire()
        try:
            if self._idle:
                return self._idle.pop()
            return await psycopg.AsyncConnection.connect(
                *self._connect_args, **self._connect_params
            )
        except BaseException:
            self._slots.release()
            raise

    def _release(self, connection: psycopg.AsyncConnection[Any], reusable: bool) -> None:
        """Back to the idle list when it ended its transaction cleanly and the pool still
        serves; closed otherwise (a cancelled task may have left it mid-statement)."""
        if reusable and self._loop is not None and not connection.closed:
            self._idle.append(connection)
        else:
            # The sync close only frees the socket; no round trip from the loop.
            connection.pgconn.finish()
        if self._slots is not None:
            self._slots.release()


def _outcome_unknown(error: psycopg.Error) -> CommitOutcomeUnknownError:
    wrapped = CommitOutcomeUnknownError("COMMIT", None, error)
    setattr(wrapped, dialect.COMMIT_OUTCOME_UNKNOWN, True)
    return wrapped
