"""The revocation generation: when a token answer remembered in memory may still be trusted.

The token gate (app/api/token_gate.py) remembers who each issued token belongs to, so that a
request does not pay a transaction of its own to look its token up. A remembered answer is
only as good as the knowledge that the token was not revoked since: every revocation (of
one token, or of a deleted worker's tokens) announces itself when it commits, and each API
process counts what it heard in :attr:`RevocationWatch.generation`. An answer is trusted
only when it was looked up at the generation of now, and only while nothing unheard can be
on its way:

* on PostgreSQL a revocation sends ``pg_notify`` on :data:`CHANNEL`, delivered when (and
  only if) the transaction commits, to every process's listening connection
  (:class:`app.db.notify.PostgresListener`, one of its own per process so that its socket
  carries nothing else). The watch counts a new generation *before* the listener reads the
  socket, and :meth:`RevocationWatch.trusted` refuses while bytes wait unread on it or while
  it does not listen (then every request looks its token up, as before);
* on SQLite nothing is remembered: there is no round trip to save, and the gate reads the
  token's row straight from the file on a connection of its own
  (:class:`app.db.tokens.DirectTokenReader`), which every process sees committed at once.

Whoever revokes calls :func:`announce_revocation` in the revoking transaction; the request
that did it answers once its own process heard it (app/api/deps.py), since PostgreSQL sends
it to every listening process at the same commit.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.db import dialect, notify
from app.db.engine import Database

#: The PostgreSQL notification channel of revocations (nothing else is sent on it).
CHANNEL = "jobmatch_revocations"

#: Set in a session's info when its transaction revoked tokens (PostgreSQL): the request
#: then waits for its own process to hear it (app/api/deps.py).
REVOKED_KEY = "jobmatch.revoked_tokens"

_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', '')")


def announce_revocation(session: Session) -> None:
    """Tell every API process, when this transaction commits, that tokens were revoked."""
    if dialect.notifies_across_processes(session.connection()):
        session.info[REVOKED_KEY] = True
        session.execute(_NOTIFY)


class RevocationWatch:
    """One process's revocation generation (module docstring)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._generation = 0
        self._changed = threading.Condition()
        self._listener: notify.PostgresListener | None = None
        self._shared = database.dialect_name == "postgresql"

    @property
    def generation(self) -> int:
        return self._generation

    def current(self) -> int | None:
        """The generation an answer must have been looked up at to be used now without
        asking the database, or None when none may be (a revocation may be on its way
        unheard). The generation is read on both sides of the check: the listener counts
        before it reads, so a notification taken off the socket meanwhile shows."""
        before = self._generation
        if not self.trusted() or self._generation != before:
            return None
        return before

    def trusted(self) -> bool:
        """Whether no revocation can be on its way unheard now. No round trip. Never on
        SQLite (module docstring)."""
        listener = self._listener
        return listener is not None and listener.listening and not listener.unread()

    def start(self) -> None:
        """Start hearing revocations (PostgreSQL); a second start while it runs does nothing."""
        if self._listener is not None or not self._shared:
            return
        listen_url = self.database.listen_url
        if listen_url is None:
            return  # behind a pooler without a direct URL: every request looks its token up
        self._listener = notify.PostgresListener(
            self.database.engine,
            self._heard,
            channel=CHANNEL,
            before_read=self._bump,
            url=listen_url,
        )
        self._listener.start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        self._bump()

    def wait_for(self, generation: int, timeout: float) -> bool:
        """Wait until this process heard news after ``generation`` (at most ``timeout``
        seconds): a revoking request answers once its own process heard its revocation,
        as every other listening process then has been sent it. At once when this
        process does not listen: it trusts no remembered answer then."""
        if not self.trusted():
            return False
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._generation <= generation:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def _heard(self, _payload: str) -> None:
        """Anything on the channel, or a reconnect (what was sent meanwhile is lost)."""
        self._bump()

    def _bump(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
