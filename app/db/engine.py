"""Engine and session factory: one :class:`Database` per process.

A unit of work is one transaction: :meth:`Database.transaction` commits when its block ends
normally and rolls back otherwise. Services only flush; the caller that opened the
transaction (an HTTP request, a CLI command) decides when it commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.db import dialect, notify
from app.db.connections import ConnectionOptions


class Database:
    """Owns the engine and hands out transactional sessions."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = 30.0,
        echo: bool = False,
        options: ConnectionOptions | None = None,
    ) -> None:
        """``options`` default to the process's settings (JOBMATCH_DB_*), so that every
        engine of a process behind a pooler knows it is."""
        self.url = url
        self.options = options if options is not None else ConnectionOptions.from_settings()
        arguments = dialect.engine_arguments(url, busy_timeout=busy_timeout, options=self.options)
        self.engine: Engine = create_engine(url, echo=echo, **arguments)
        dialect.install_hooks(self.engine, busy_timeout=busy_timeout, options=self.options)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        #: Who hears, in this process, what committed transactions announced
        #: (app/db/notify.py); on PostgreSQL the database itself carries them instead.
        self.subscribers: list[Callable[[str], None]] = []

    @property
    def dialect_name(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Session]:
        """A session inside one transaction; ``write=False`` for read-only work."""
        session = self._sessions()
        try:
            # Procure the connection now, with the write intent the SQLite BEGIN hook reads.
            session.connection(execution_options={dialect.WRITE_OPTION: write})
            yield session
            notify.send_pending(session)
            try:
                session.commit()
            except DBAPIError as error:
                # Stored or not, nobody knows: never run again as a lost connection.
                setattr(error, dialect.COMMIT_OUTCOME_UNKNOWN, True)
                raise
            committed = notify.take_committed(session)
        except BaseException:
            notify.forget_pending(session)
            session.rollback()
            raise
        finally:
            session.close()
        if committed is not None:
            for subscriber in list(self.subscribers):
                subscriber(committed)

    @contextmanager
    def core_transaction(self) -> Iterator[Connection]:
        """A Core connection inside one transaction, for work that needs no Session (the
        express pull and finish, app/matching/dispatch/express.py). Like
        :meth:`transaction` it commits when the block ends normally, rolls back
        otherwise, marks an error of the COMMIT itself as of unknown outcome, and sends the
        announcements left for the commit (app/db/notify.py) before it."""
        with self.engine.connect() as connection:
            begun = connection.begin()
            try:
                yield connection
                notify.send_pending(connection)
            except BaseException:
                if not connection.invalidated:  # else its info went with the dead connection
                    notify.forget_pending(connection)
                begun.rollback()
                raise
            try:
                begun.commit()
            except DBAPIError as error:
                setattr(error, dialect.COMMIT_OUTCOME_UNKNOWN, True)
                raise

    @property
    def listen_url(self) -> URL | None:
        """Where this process's LISTEN connections go (PostgreSQL): the database URL, or
        the direct listen URL when a pooler stands in front; None when behind a pooler
        without one (then nothing listens: app/db/connections.py)."""
        if self.dialect_name != "postgresql":
            return None
        if self.options.listen_url:
            return make_url(self.options.listen_url)
        return None if self.options.behind_pooler else self.engine.url

    def ping(self) -> None:
        """Raise when the database cannot answer a trivial query."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            end_read(connection)

    def dispose(self) -> None:
        self.engine.dispose()


def end_read(connection: Connection) -> None:
    """End a read-only transaction with COMMIT rather than the pool's ROLLBACK on return:
    psycopg forgets all prepared statements of a connection at every ROLLBACK, and the
    next pulls on that pooled connection would parse and plan each statement again
    (a readiness probe every few seconds would keep doing that)."""
    connection.commit()
