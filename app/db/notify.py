"""Announcements that work may be waiting: sent with the transaction that made it so.

Long-polling pulls (``POST /v1/workers/{name}/pull?wait=...``) sleep until something that
could give their worker a job happens. The writer that made it happen (a submission, a
finish, a worker change) announces it with :func:`announce`; the announcement leaves only
when that transaction commits, so a woken waiter always sees the change:

* on PostgreSQL, the transaction's announcements are sent as one ``pg_notify`` on
  :data:`CHANNEL` just before the commit. PostgreSQL delivers a notification only when the
  transaction commits, to every connection that listens, whichever process or machine it
  belongs to; :class:`PostgresListener` is the one listening connection of an API process;
* on SQLite (one process), :class:`~app.db.engine.Database` hands them to its in-process
  subscribers right after the commit.

An announcement is a short token (:mod:`app.matching.wakeups` gives them their meaning);
this module only carries them and knows nothing of what they say.
"""

from __future__ import annotations

import logging
import select
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import psycopg
from sqlalchemy import String, case, func, literal, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.orm import Session

from app.db import dialect

log = logging.getLogger(__name__)

#: What a transaction's announcements are kept on: its Session, or the Core connection of
#: a transaction without one (``Database.core_transaction``). A connection's ``info``
#: outlives the transaction, so :func:`send_pending` and :func:`forget_pending` empty it.
Holder = Session | Connection


class LoopHolder(Protocol):
    """A transaction on the event loop's asyncio connection (app/db/event_loop.py): it
    keeps its announcements in ``info`` as a Session does."""

    @property
    def info(self) -> dict[str, Any]: ...

    @property
    def connection(self) -> psycopg.AsyncConnection[Any]: ...


#: The PostgreSQL notification channel of every announcement.
CHANNEL = "jobmatch_work"
#: Where a session keeps the announcements of its transaction until it commits.
PENDING_KEY = "jobmatch.announcements"
#: Where it keeps those that a statement of the transaction already sent itself.
SENT_KEY = "jobmatch.announcements.sent"
#: PostgreSQL refuses notification payloads of 8,000 bytes or more; a transaction that
#: announced more sends :data:`EVERYTHING` instead.
MAX_PAYLOAD = 7_900
#: The announcement that stands for any other: every waiter should look again.
EVERYTHING = "*"

_NOTIFY = text("SELECT pg_notify(:channel, :payload)")


def announce(session: Holder | LoopHolder, *tokens: str) -> None:
    """Announce, when this session's (or Core connection's) transaction commits, that
    something the tokens name happened. The same token announced twice in a transaction
    is sent once."""
    pending: set[str] = session.info.setdefault(PENDING_KEY, set())
    pending.update(tokens)


def notify_column(payload: Any) -> Any:
    """``pg_notify`` of ``payload`` (an SQL expression) on :data:`CHANNEL`, to embed in a
    statement that then announces by itself, in the round trip it makes anyway; the
    caller says so with :func:`sent_by_statement`."""
    return func.pg_notify(CHANNEL, payload)


def notify_all_column(tokens: Any) -> Any:
    """:func:`notify_column` of every token of a statement's rows (``tokens``, an SQL
    expression over them; an aggregate, so the SELECT it is in gives one row) as one
    payload, as :func:`payload_of` joins a transaction's tokens at its commit: one
    notification for the listeners to read instead of one per row, :data:`EVERYTHING`
    when they would not fit in one. Nothing is sent when there is no row."""
    joined = func.string_agg(tokens, literal(" ", String))
    payload = case((func.length(joined) > MAX_PAYLOAD, literal(EVERYTHING, String)), else_=joined)
    return case((func.count() > 0, notify_column(payload)))


def sent_by_statement(session: Holder | LoopHolder, *tokens: str) -> None:
    """A statement of this transaction sent these tokens itself (:func:`notify_column`):
    the commit sends them no second time. Like any notification they are delivered when,
    and only if, the transaction commits."""
    session.info.setdefault(SENT_KEY, set()).update(tokens)


def payload_of(tokens: Iterable[str]) -> str:
    """The tokens as one payload (space separated, sorted), or :data:`EVERYTHING` when they
    would not fit in one notification."""
    payload = " ".join(sorted(set(tokens)))
    return EVERYTHING if len(payload) > MAX_PAYLOAD or EVERYTHING in payload.split() else payload


def send_pending(session: Holder) -> None:
    """Before the commit: on PostgreSQL, send the transaction's announcements as one
    notification (delivered when, and only if, the transaction commits)."""
    pending: set[str] | None = session.info.get(PENDING_KEY)
    sent: set[str] = session.info.pop(SENT_KEY, set())
    if not pending:
        return
    connection = session.connection() if isinstance(session, Session) else session
    if not dialect.notifies_across_processes(connection):
        return
    if pending - sent:
        session.execute(_NOTIFY, {"channel": CHANNEL, "payload": payload_of(pending - sent)})
    pending.clear()


#: The statement that announces a payload on :data:`CHANNEL`.
NOTIFY_SQL = b"SELECT pg_notify($1, $2)"


def payload_to_send(transaction: LoopHolder) -> str | None:
    """For a transaction on the event loop's connection (app/db/event_loop.py,
    PostgreSQL), about to commit: the payload of its announcements that no statement sent
    (one ``pg_notify`` of :data:`NOTIFY_SQL` with its COMMIT), or None; forgets them."""
    pending: set[str] | None = transaction.info.get(PENDING_KEY)
    sent: set[str] = transaction.info.pop(SENT_KEY, set())
    payload = payload_of(pending - sent) if pending and pending - sent else None
    if pending:
        pending.clear()
    return payload


def take_committed(session: Session) -> str | None:
    """After the commit: the announcements that are still to deliver in this process (on
    SQLite; PostgreSQL sent them), as one payload, and forget them."""
    pending: set[str] | None = session.info.pop(PENDING_KEY, None)
    session.info.pop(SENT_KEY, None)
    return payload_of(pending) if pending else None


def forget_pending(session: Holder) -> None:
    """After a rollback: nothing happened, nothing is announced."""
    session.info.pop(PENDING_KEY, None)
    session.info.pop(SENT_KEY, None)


Deliver = Callable[[str], None]


class PostgresListener:
    """One connection of its own that LISTENs on ``channel`` (:data:`CHANNEL` unless told)
    and hands every payload to ``deliver``, from a thread of its own. It sends no statement
    while it waits.

    When the connection is lost it reconnects with a capped backoff and delivers
    :data:`EVERYTHING` once it listens again: notifications sent meanwhile are lost, so every
    waiter looks again.

    ``url`` is where it connects (the engine's own URL unless told: behind a pooler, a
    direct one, app/db/connections.py).

    ``before_read``, when given, is called each time the connection has something to read,
    before it is read: a caller that must never act on news it has not yet heard
    (app/db/revocations.py) learns there is news before the bytes leave the socket, and
    :meth:`unread` tells it whether some are waiting there now.

    ``application_name`` names the connection in ``pg_stat_activity``, where others can
    count the listeners of a channel; :meth:`send` notifies the channel from this
    connection (an acknowledgement, app/db/revocations.py), by the listening thread itself,
    which is the only one that may use the connection."""

    #: How often the thread looks up from the socket to see whether it should stop.
    POLL_SECONDS = 0.5
    MAX_BACKOFF_SECONDS = 5.0

    def __init__(
        self,
        engine: Engine,
        deliver: Deliver,
        *,
        channel: str = CHANNEL,
        before_read: Callable[[], None] | None = None,
        url: URL | None = None,
        application_name: str | None = None,
    ) -> None:
        cargs, cparams = engine.dialect.create_connect_args(url or engine.url)
        self._connect_args: tuple[Any, ...] = tuple(cargs)
        self._connect_params: dict[str, Any] = dict(cparams)
        if application_name is not None:
            self._connect_params["application_name"] = application_name
        #: The server process of the listening connection while it listens, else None.
        self.backend_pid: int | None = None
        #: Payloads :meth:`send` queued for the listening thread to notify on the channel.
        self._outbox: list[str] = []
        self._outbox_lock = threading.Lock()
        #: True while the thread sends on the connection: psycopg may take notifications
        #: off the socket meanwhile, which :meth:`unread` must then still count as unread.
        self._talking = False
        self._deliver = deliver
        self.channel = channel
        self._before_read = before_read
        #: The listening connection's socket while it listens, else None.
        self._fileno: int | None = None
        self._stop = threading.Event()
        self._listening = threading.Event()
        #: Set once the first connection attempt is over, whether it listens or failed.
        self._first_attempt = threading.Event()
        self._thread: threading.Thread | None = None
        #: A channel only this listener hears: stop() notifies it, so the thread looks up
        #: at once instead of at its next poll (a server or test app stops in milliseconds).
        self._wake_channel = f"jobmatch_stop_{uuid.uuid4().hex}"

    def start(self, ready_timeout: float = 10.0) -> None:
        """Start listening; returns once the first LISTEN ran (or ``ready_timeout`` passed),
        so that waiters registered from now on miss nothing. When the first attempt fails
        it returns at once: a database that refused the connection announces nothing
        meanwhile, and a server whose database is down should start (and say so on
        /readyz) instead of waiting out ``ready_timeout`` for each listener."""
        self._stop.clear()
        self._first_attempt.clear()
        self._thread = threading.Thread(target=self._run, name="jobmatch-listener", daemon=True)
        self._thread.start()
        self._first_attempt.wait(ready_timeout)
        if not self._listening.is_set():
            log.warning("not listening for %s yet", self.channel)

    def stop(self) -> None:
        self._stop.set()
        if self._listening.is_set():
            self._wake_thread()
        if self._thread is not None:
            self._thread.join(timeout=self.POLL_SECONDS * 4 + 1)
            self._thread = None

    def _wake_thread(self) -> None:
        """Notify the private channel; when that fails the thread stops at its next poll."""
        try:
            with psycopg.connect(
                *self._connect_args, **self._connect_params, autocommit=True, connect_timeout=2
            ) as connection:
                connection.execute(f"NOTIFY {self._wake_channel}")
        except psycopg.Error as error:
            log.debug("waking the listener failed (%s); it stops at its next poll", error)

    def _run(self) -> None:
        backoff = 0.1
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    *self._connect_args, **self._connect_params, autocommit=True
                ) as connection:
                    connection.execute(f"LISTEN {self.channel}")
                    connection.execute(f"LISTEN {self._wake_channel}")
                    self.backend_pid = connection.info.backend_pid
                    self._fileno = connection.fileno()
                    self._listening.set()
                    self._first_attempt.set()
                    if not first:
                        self._deliver(EVERYTHING)
                    first = False
                    backoff = 0.1
                    try:
                        self._listen(connection)
                    finally:
                        self._fileno = None
                        self.backend_pid = None
            except (psycopg.Error, OSError) as error:
                log.warning(
                    "listening for %s failed (%s); retrying in %.1f s",
                    self.channel,
                    error,
                    backoff,
                )
                self._first_attempt.set()
                # Waiters may register while no connection listens: once one does, they
                # look again, as after a lost connection.
                first = False
                self._stop.wait(backoff)
                backoff = min(self.MAX_BACKOFF_SECONDS, backoff * 2)

    @property
    def listening(self) -> bool:
        """Whether the connection listens now (notifications sent now will be heard)."""
        return self._fileno is not None and not self._stop.is_set()

    def unread(self) -> bool:
        """Whether bytes wait on the listening connection's socket, not yet read (or no
        socket listens now): a notification may be among them. No round trip."""
        fileno = self._fileno
        if fileno is None or self._talking:
            return True
        try:
            readable, _, _ = select.select([fileno], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def send(self, payload: str) -> None:
        """Notify ``payload`` on the channel from the listening connection, soon: the
        listening thread sends it once it has delivered what it read (call it from
        ``deliver`` to answer a notification). Lost when the connection is."""
        with self._outbox_lock:
            self._outbox.append(payload)

    def _send_outbox(self, connection: psycopg.Connection[Any]) -> bool:
        """Send what :meth:`send` queued; whether anything was sent."""
        with self._outbox_lock:
            payloads, self._outbox = self._outbox, []
        if not payloads:
            return False
        self._talking = True  # cleared once what it may have read is delivered
        for payload in payloads:
            connection.execute("SELECT pg_notify(%s, %s)", (self.channel, payload))
        return True

    def _listen(self, connection: psycopg.Connection[Any]) -> None:
        while not self._stop.is_set():
            # What has arrived (psycopg may also hold some read while LISTEN ran).
            for notification in connection.notifies(timeout=0):
                if notification.channel == self._wake_channel:
                    return
                try:
                    self._deliver(notification.payload)
                except Exception:  # a failed delivery must not stop the listener
                    log.exception("delivering %r failed", notification.payload)
            self._talking = False  # whatever was read has been delivered
            if self._send_outbox(connection):
                continue  # deliver at once what arrived while it sent
            # Wait on the socket ourselves so that ``before_read`` runs before psycopg
            # takes the bytes off it (at the top of the loop).
            readable, _, _ = select.select([connection.fileno()], [], [], self.POLL_SECONDS)
            if readable and self._before_read is not None:
                self._before_read()
