"""PostgreSQL connections for the event loop itself: the express lane's pull and finish
without the hop to the thread pool (issue 23).

Every other request runs its transaction in a thread, on SQLAlchemy's pool. For the two
requests a busy farm sends most, that hop and SQLAlchemy's connection handling around
two prebuilt statements were about a third of the server's CPU per pull+finish
(``bench/http_floor.py``: 2.8 ms of server CPU per job through the threads, 1.9 ms on
the loop). Here they run on psycopg's asyncio connection, from a small pool of this
module's own, while the loop goes on serving other requests between round trips. The
statements go through the connection's libpq pipeline directly
(app/db/loop_pipeline.py), and a transaction's BEGIN with its first statements, its
COMMIT with its announcements (issue 38): a transaction of one pipeline of statements is
two round trips.

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
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from app.db import dialect, notify
from app.db.engine import Database
from app.db.loop_pipeline import BEGIN, COMMIT, ROLLBACK, LoopPipeline, Query, Step
from app.db.prebuilt import PIPELINES, Prebuilt, rows_together_async


class CommitOutcomeUnknownError(DBAPIError):
    """The COMMIT of a transaction on the event loop failed (the connection died or the
    server refused it): whether its writes were stored is unknown."""


#: The planner settings of the event loop's connections. Their statements (the express
#: pull, finish, batch and submission) find their rows by key, and each runs on a plan
#: prepared once per connection (app/db/loop_pipeline.py): a plan made while a table was
#: small reads it whole for as long as the connection lives. Issue 38's drains,
#: ANALYZEd before the first pull (no allocation yet), scanned every allocation ever
#: made on each finish (5,517 sequential scans reading 15.2 million rows in a drain of
#: 6,000 jobs); with sequential scans priced out, 3, and PostgreSQL's CPU per job fell
#: from 1.24 to 1.10 ms. A table without a usable index is still read whole.
KEYED_PLANS = "-c enable_seqscan=off"
#: How the event loop's connections name themselves in ``pg_stat_activity`` (unless the
#: database URL names its connections itself).
APPLICATION_NAME = "jobmatch-event-loop"


@dataclass
class LoopTransaction:
    """One transaction on the event loop's connection: the connection's pipeline
    (app/db/loop_pipeline.py), the dialect its statements are compiled for (the
    engine's), and ``info``, where its announcements wait for the COMMIT as on a Session
    (app/db/notify.py)."""

    pipeline: LoopPipeline
    dialect: Dialect
    info: dict[str, Any] = field(default_factory=dict)
    #: Whether its BEGIN was sent: the connection is in autocommit mode, and the first
    #: statements of each transaction carry the BEGIN in their own pipeline.
    begun: bool = False

    async def rows(self, *calls: tuple[Prebuilt, Mapping[str, Any]]) -> list[list[tuple[Any, ...]]]:
        """The prebuilt statements run together in this transaction
        (:func:`app.db.prebuilt.rows_together_async`), the first ones opening it."""
        begin, self.begun = not self.begun, True
        return await rows_together_async(self.pipeline, self.dialect, *calls, begin=begin)

    async def execute(
        self, query: str | bytes, params: Sequence[Any] | None = None
    ) -> psycopg.AsyncCursor[Any]:
        """One statement in this transaction through psycopg's own cursor (opening the
        transaction when it is the first); its cursor, with the rows it answered. For
        what is not a prebuilt statement: the lane's are :meth:`rows`."""
        if not self.begun:
            self.begun = True
            await self.pipeline.run([BEGIN])
        return await self.connection.execute(query, params)

    @property
    def connection(self) -> psycopg.AsyncConnection[Any]:
        return self.pipeline.connection


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
        self._idle: list[LoopPipeline] = []

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
            # Each transaction sends its own BEGIN with its first statements
            # (LoopTransaction): psycopg's own waits a round trip for it.
            "autocommit": True,
        }
        connect_params["options"] = f"{connect_params.get('options', '')} {KEYED_PLANS}".strip()
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
        for pipeline in idle:
            await pipeline.connection.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[LoopTransaction]:
        """A connection inside one transaction: committed when the block ends normally,
        with the announcements left for the commit sent in the same round trip, and
        rolled back when it raises. Its BEGIN goes with its first statements
        (:meth:`LoopTransaction.rows`), so that a transaction of one pipeline of
        statements is two round trips, not three. A driver error is raised wrapped as
        SQLAlchemy wraps it (so that :func:`app.db.dialect.is_retryable_error` judges it
        alike); see the module docstring for a failed COMMIT."""
        if self.dialect is None:
            raise RuntimeError("the pool has no dialect to compile statements for")
        pipeline = await self._acquire()
        connection = pipeline.connection
        transaction = LoopTransaction(pipeline, self.dialect)
        reusable = False
        try:
            try:
                try:
                    yield transaction
                except BaseException:
                    await _roll_back(transaction)
                    raise
                await _commit(transaction)
            except psycopg.Error as error:
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
            self._release(pipeline, reusable)

    async def _acquire(self) -> LoopPipeline:
        if self._slots is None:
            raise RuntimeError("the pool serves only between bind() and close()")
        await self._slots.acquire()
        try:
            if self._idle:
                return self._idle.pop()
            connection = await psycopg.AsyncConnection.connect(
                *self._connect_args, **self._connect_params
            )
            return LoopPipeline(connection)
        except BaseException:
            self._slots.release()
            raise

    def _release(self, pipeline: LoopPipeline, reusable: bool) -> None:
        """Back to the idle list when it ended its transaction cleanly and the pool still
        serves; closed otherwise (a cancelled task may have left it mid-statement)."""
        if reusable and self._loop is not None and not pipeline.connection.closed:
            self._idle.append(pipeline)
        else:
            # The sync close only frees the socket; no round trip from the loop.
            pipeline.connection.pgconn.finish()
        if self._slots is not None:
            self._slots.release()


async def _commit(transaction: LoopTransaction) -> None:
    """COMMIT, after the transaction's announcements (one ``pg_notify``), in one round
    trip. An announcement that failed leaves the transaction rolled back and raises
    psycopg's error; a COMMIT that failed raises :class:`CommitOutcomeUnknownError`."""
    connection = transaction.connection
    payload = notify.payload_to_send(transaction)
    if not transaction.begun and payload is None:
        return  # no statement ran: nothing to commit
    steps: list[Step] = []
    if payload is not None:
        steps.append(Query(notify.NOTIFY_SQL, (notify.CHANNEL, payload)))
    if transaction.begun:
        steps.append(COMMIT)
    try:
        await transaction.pipeline.run(steps)
    except psycopg.Error as error:
        if not transaction.begun:
            raise
        if connection.info.transaction_status == pq.TransactionStatus.INERROR:
            # The announcement failed, so the COMMIT did not run: nothing was stored.
            await _roll_back(transaction)
            raise
        raise _outcome_unknown(error) from error


async def _roll_back(transaction: LoopTransaction) -> None:
    """ROLLBACK a transaction that began, where the connection can still say it. One
    that cannot (it died, or a cancelled task left it mid-statement) stays out of the
    idle state, and the pool closes it."""
    connection = transaction.connection
    if not transaction.begun or connection.broken:
        return
    if connection.info.transaction_status not in _OPEN:
        return
    with suppress(psycopg.Error):
        await transaction.pipeline.run([ROLLBACK])


#: The states of a connection in a transaction that a ROLLBACK ends.
_OPEN = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)


def _outcome_unknown(error: psycopg.Error) -> CommitOutcomeUnknownError:
    wrapped = CommitOutcomeUnknownError("COMMIT", None, error)
    setattr(wrapped, dialect.COMMIT_OUTCOME_UNKNOWN, True)
    return wrapped
