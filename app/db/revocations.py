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
that did it answers once every process has heard it (app/api/deps.py). PostgreSQL sends the
notification to every listening connection at the same commit, but each process reads it
in its own time; so every listener answers each revocation it hears with an
acknowledgement on the same channel, and :meth:`RevocationWatch.wait_heard_everywhere`
waits until every listener that ``pg_stat_activity`` shows (by :data:`APPLICATION_NAME`,
connected before the revoking transaction began) has acknowledged it. Only then may the
caller's next request reach another process. A listener that connected while the
revocation committed may never acknowledge it; the wait is bounded, and such a listener's
process trusted nothing remembered from before its connection anyway.

Payloads on :data:`CHANNEL`: ``r:<id>`` a revocation, ``a:<id>:<pid>`` the listener of
server process ``pid`` heard revocation ``id``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.db import dialect, notify
from app.db.engine import Database

#: The PostgreSQL notification channel of revocations (nothing else is sent on it).
CHANNEL = "jobmatch_revocations"

#: The ``application_name`` of every process's revocation listener in ``pg_stat_activity``.
APPLICATION_NAME = "jobmatch-revocations"

#: Set in a session's info when its transaction revoked tokens (PostgreSQL): a
#: :class:`Revoked`; the request then waits for every process to hear it (app/api/deps.py).
REVOKED_KEY = "jobmatch.revoked_tokens"

#: How many revocations' acknowledgements a process keeps (it hears everyone's).
_KEPT_REVOCATIONS = 256

_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', :payload), now()")
_LISTENERS = text(
    "SELECT pid FROM pg_stat_activity"
    " WHERE application_name = :name AND datname = current_database()"
    " AND backend_start < :began"
)


class Revoked:
    """The revocations of one transaction: their ids, and when the transaction began."""

    def __init__(self, began: datetime) -> None:
        self.began = began
        self.ids: list[str] = []


def announce_revocation(session: Session) -> None:
    """Tell every API process, when this transaction commits, that tokens were revoked."""
    if not dialect.notifies_across_processes(session.connection()):
        return
    revocation = uuid.uuid4().hex
    began = session.execute(_NOTIFY, {"payload": f"r:{revocation}"}).one()[1]
    revoked = session.info.setdefault(REVOKED_KEY, Revoked(began))
    revoked.ids.append(revocation)


class RevocationWatch:
    """One process's revocation generation (module docstring)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._generation = 0
        self._changed = threading.Condition()
        self._listener: notify.PostgresListener | None = None
        self._shared = database.dialect_name == "postgresql"
        #: Revocation id -> the server processes of the listeners that acknowledged it.
        self._acknowledged: OrderedDict[str, set[int]] = OrderedDict()

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
            application_name=APPLICATION_NAME,
        )
        self._listener.start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        self._bump()

    def wait_heard_everywhere(self, revoked: Revoked, timeout: float) -> bool:
        """Wait until every process's listener acknowledged ``revoked`` (module docstring),
        at most ``timeout`` seconds; whether all did. One query for the listeners."""
        deadline = time.monotonic() + timeout
        listener = self._listener
        if listener is None or not listener.listening:
            return False  # this process hears nothing; the others may, but cannot tell us
        with self.database.engine.connect() as connection:
            listeners = {
                int(pid)
                for (pid,) in connection.execute(
                    _LISTENERS, {"name": APPLICATION_NAME, "began": revoked.began}
                )
            }
            connection.rollback()
        with self._changed:
            while not self._all_acknowledged(revoked.ids, listeners):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def _all_acknowledged(self, revocations: Iterable[str], listeners: set[int]) -> bool:
        return all(listeners <= self._acknowledged.get(each, set()) for each in revocations)

    def _heard(self, payload: str) -> None:
        """Anything on the channel, or a reconnect (what was sent meanwhile is lost)."""
        kind, _, rest = payload.partition(":")
        if kind == "a":
            revocation, _, pid = rest.partition(":")
            with self._changed:
                self._acknowledged.setdefault(revocation, set()).add(int(pid))
                self._acknowledged.move_to_end(revocation)
                while len(self._acknowledged) > _KEPT_REVOCATIONS:
                    self._acknowledged.popitem(last=False)
                self._changed.notify_all()
            return
        self._bump()
        listener = self._listener
        if kind == "r" and listener is not None and listener.backend_pid is not None:
            listener.send(f"a:{rest}:{listener.backend_pid}")

    def _bump(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
