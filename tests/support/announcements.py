"""What a listening process hears of the announcements (app/db/notify.py), on PostgreSQL."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import URL, make_url

from app.db import notify
from app.db.engine import Database
from tests.databases import DIRECT_SERVER_ENV


class Heard:
    """The payloads a listener delivered, and a wait for one token among them."""

    def __init__(self) -> None:
        self.payloads: list[str] = []

    def tokens(self) -> list[str]:
        return " ".join(self.payloads).split()

    def wait_for(self, token: str, seconds: float = 10.0) -> bool:
        deadline = time.monotonic() + seconds
        while token not in self.tokens() and time.monotonic() < deadline:
            time.sleep(0.02)
        return token in self.tokens()


def direct_url(database: Database) -> URL:
    """The database's own URL, or behind the pooler the same database on the server
    (DIRECT_SERVER_ENV, set by tests/db/test_pgbouncer.py for the cases it runs through
    PgBouncer): LISTEN cannot pass a pooler in transaction mode, so a listener connects
    there directly, as JOBMATCH_DATABASE_LISTEN_URL makes a deployment's do."""
    url = database.engine.url
    server = os.environ.get(DIRECT_SERVER_ENV)
    if not server:
        return url
    direct = make_url(server)
    return url.set(
        host=direct.host, port=direct.port, username=direct.username, password=direct.password
    )


@contextmanager
def listening(database: Database) -> Iterator[Heard]:
    """A listener of the announcement channel, as every API process has, for the block."""
    heard = Heard()
    listener = notify.PostgresListener(
        database.engine, heard.payloads.append, url=direct_url(database)
    )
    listener.start()
    try:
        yield heard
    finally:
        listener.stop()
