"""How a process connects to its database: pool size, and what a connection pooler in
front of PostgreSQL (PgBouncer in transaction pooling) takes away.

With transaction pooling each transaction may run on another server connection, so
nothing that lives on a server connection beyond one transaction can be relied on:

* prepared statements: psycopg prepares a statement on the server after it ran five times
  on a connection (``prepare_threshold``); the next transaction may land on a server
  connection that never saw it. Behind a pooler they are off (``prepare_threshold=None``);
* startup options: PgBouncer refuses a startup parameter it does not know, ``options``
  among them (its ``ignore_startup_parameters``), so JIT cannot be turned off at connect.
  It is turned off per transaction instead, unless the database already has it off
  (``ALTER DATABASE ... SET jit = off``): app/db/dialect.py looks once per connection;
* LISTEN: a listening session must stay on one server connection. Long-poll wake-ups and
  token revocations listen on ``listen_url``, a direct connection to PostgreSQL; without
  one, a process behind a pooler does not listen (waiting pulls look again every second,
  and every request looks its token up: app/api/longpoll.py, app/db/revocations.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.settings import Settings, get_settings


@dataclass(frozen=True)
class ConnectionOptions:
    """Pool and pooler settings of one :class:`~app.db.engine.Database` (PostgreSQL; SQLite
    ignores them)."""

    #: Connections each process keeps open, and how many more it may open under load
    #: (closed again at once: see app/settings.py).
    pool_size: int = 20
    max_overflow: int = 0
    #: A pooler in transaction mode stands between the process and PostgreSQL.
    behind_pooler: bool = False
    #: Whether psycopg may prepare statements; None: yes unless behind a pooler.
    prepared_statements: bool | None = None
    #: A direct URL for the LISTEN connections (same database), when behind a pooler.
    listen_url: str | None = None

    @property
    def prepares_statements(self) -> bool:
        if self.prepared_statements is None:
            return not self.behind_pooler
        return self.prepared_statements

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> ConnectionOptions:
        settings = settings or get_settings()
        return cls(
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            behind_pooler=settings.db_pooler != "none",
            prepared_statements=settings.db_prepared_statements,
            listen_url=settings.database_listen_url,
        )
