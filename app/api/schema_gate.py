"""The schema gate: while the database's schema is not at the head of this jobmatch's
migrations, every request but the probes is answered 503 problem+json saying where the
schema is, where it should be and to run ``jobmatch db upgrade``, instead of a 500 and a
traceback per request from a table that does not exist (issue 35).

The check is one query, made at start-up (where a schema not at head is logged as a
warning), then at most once every :data:`RECHECK_SECONDS` while it is not at head, on the
first request after that time: another process, or an operator, may upgrade the shared
database while this one runs, and the next request after the upgrade is served without a
restart. Once the schema is seen at head the gate never asks again and costs one attribute
read per request (a downgrade under a running server is not something it watches for).
A check that fails (the database unreachable) lets requests through, as before the gate:
they meet their own errors (503 "the database is unavailable"), and the gate asks again
later.

A pure ASGI middleware, placed before the token gate: a worker token is looked up in a
table that an unmigrated database does not have.
"""

from __future__ import annotations

import logging
import threading
import time

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.raw_problems import send_problem
from app.db.engine import Database
from app.db.schema_state import SchemaState, read_schema_state

log = logging.getLogger("app.api")

#: At most one check per this many seconds while the schema is not at head.
RECHECK_SECONDS = 2.0

#: What a client is told to wait before it asks again.
RETRY_AFTER = "5"

#: The probes answer for themselves (/readyz says the same as the gate, as a probe).
PROBES = frozenset({"/healthz", "/readyz"})

TITLE = "Database schema not at head"


class SchemaWatch:
    """What the process last learned of the schema, and when it may ask again."""

    def __init__(self, database: Database, recheck_seconds: float = RECHECK_SECONDS) -> None:
        self.database = database
        self.recheck_seconds = recheck_seconds
        #: Set once the schema was seen at head; from then on nothing is asked.
        self.at_head = False
        self.state: SchemaState | None = None
        self._checked_at: float | None = None
        self._lock = threading.Lock()

    def due(self) -> bool:
        checked = self._checked_at
        return checked is None or time.monotonic() - checked >= self.recheck_seconds

    def check(self) -> SchemaState | None:
        """Ask the database when a check is due (one thread at a time; the others wait for
        its answer), and return what is known: None when nothing could be read."""
        with self._lock:
            if self.at_head or not self.due():
                return self.state
            self._checked_at = time.monotonic()
            try:
                state = read_schema_state(self.database.engine)
            except Exception as error:  # unreachable, refused: the requests will say so
                log.warning("could not read the database schema's revision: %s", error)
                self.state = None
                return None
            self.state = state
            self.at_head = state.at_head
            return state

    def ready(self) -> bool:
        """Whether the schema is at head, checking first when a check is due."""
        self.check()
        return self.at_head

    def check_at_start(self) -> None:
        """The start-up check: a schema not at head is logged as a warning (the server
        starts all the same, answering 503 until the schema is upgraded)."""
        state = self.check()
        if state is not None and not state.at_head:
            log.warning(
                "%s; until then every request but /healthz and /readyz is answered 503",
                state.describe(),
            )


class SchemaGateMiddleware:
    """Answers 503 while the watch says the schema is not at head (module docstring)."""

    def __init__(self, app: ASGIApp, watch: SchemaWatch) -> None:
        self.app = app
        self.watch = watch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = self.watch
        if watch.at_head or scope["type"] != "http" or scope["path"] in PROBES:
            await self.app(scope, receive, send)
            return
        state = watch.state
        if watch.due():
            state = await anyio.to_thread.run_sync(watch.check)
        if state is None or state.at_head:
            await self.app(scope, receive, send)
            return
        await send_problem(
            scope,
            send,
            503,
            state.describe(),
            title=TITLE,
            headers={"Retry-After": RETRY_AFTER},
            current_revisions=sorted(state.current),
            head_revisions=sorted(state.heads),
        )
