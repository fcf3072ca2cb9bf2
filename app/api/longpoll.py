"""Long-poll dispatch: the process's wake-up hub, fed by the database's announcements.

One :class:`LongPoll` per app. It owns the :class:`~app.matching.wakeups.WakeupHub` of the
process and what feeds it: on PostgreSQL one LISTEN connection (app/db/notify.py), so that
a submission to any API process, on any machine, wakes the waiters of this one; on SQLite
the in-process announcements of the app's :class:`~app.db.engine.Database`, delivered after
each commit. The hub's fit questions run in their own short read transaction.

Shutdown: uvicorn waits for open requests before it runs the app's lifespan shutdown, so
a pull waiting 60 s would hold the server's exit for as long. The HTTP protocol
(app/api/http_protocol.py) therefore closes the hub as soon as uvicorn starts shutting
down: every waiter answers its 204 at once, and no new pull waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app.db import notify
from app.db.engine import Database
from app.matching import misfits
from app.matching.wakeups import MAX_CONCURRENT_ATTEMPTS, MAX_QUIET_SECONDS, Waiter, WakeupHub

log = logging.getLogger(__name__)

#: The body of a pulled job (the API's JobOut), kept generic so that this module needs no
#: route's schema.
Body = TypeVar("Body")

#: How often a waiting pull looks again when its process cannot hear announcements (behind
#: a connection pooler without a direct listen URL).
POLL_SECONDS = 1.0

#: The key under which the lifespan state (and so uvicorn's protocols) find the hub.
STATE_KEY = "jobmatch_wakeups"


#: Connections of the database pool left to the other requests (submissions, the hub's fit
#: questions, token checks, probes) while waiting pulls' attempts hold the rest.
POOL_RESERVE = 2


def attempts_within_pool(database: Database) -> int:
    """How many waiting pulls' attempts may run at once: fewer than the connections the
    database pool keeps. Beyond them each attempt opened a connection of the pool's
    overflow, which the pool closed as soon as it came back to a full pool: at 10,000
    workers with 16 attempts against a pool of 10, PostgreSQL started some 6 sessions a
    second (bench/longpoll.py), each a process to fork and warm, and most of the
    machine's CPU went to that."""
    size = getattr(database.engine.pool, "size", None)
    kept = size() if callable(size) else MAX_CONCURRENT_ATTEMPTS + POOL_RESERVE
    return max(1, min(MAX_CONCURRENT_ATTEMPTS, kept - POOL_RESERVE))


#: The longest a pull may wait for work; a client's read timeout must be longer.
MAX_WAIT_SECONDS = 60.0


def quiet_within(worker_timeout_seconds: float) -> float:
    """How long a worker's renewed pulls may stand on its last attempt
    (:meth:`WakeupHub.renew_quietly`). They stamp no ``last_seen``; the attempt did. The
    renewals stand on it for at most this long and the last of them waits at most
    :data:`MAX_WAIT_SECONDS` more: together within half the worker timeout, so that a
    worker that keeps renewing is never taken for silent (0: a timeout too short for
    any). Without a timeout (0), :data:`MAX_QUIET_SECONDS`."""
    if worker_timeout_seconds <= 0:
        return MAX_QUIET_SECONDS
    return max(0.0, min(MAX_QUIET_SECONDS, worker_timeout_seconds / 2 - MAX_WAIT_SECONDS))


class LongPoll:
    """The hub and its feed for one app (module docstring)."""

    def __init__(
        self,
        database: Database,
        max_waiting: int | None = None,
        max_quiet: float = MAX_QUIET_SECONDS,
    ) -> None:
        self.database = database
        self.hub = WakeupHub(self._fitting, max_waiting, attempts_within_pool(database))
        self.hub.max_quiet = max_quiet
        self._listener: notify.PostgresListener | None = None

    def _fitting(self, category_id: int, worker_ids: frozenset[int]) -> set[int]:
        with self.database.transaction(write=False) as session:
            return misfits.fitting_workers(session, category_id, worker_ids)

    def start(self) -> None:
        """Start the feed; a second start while it runs does nothing (an app's lifespan may
        be entered twice, as schemathesis' ASGI client does, and leave once), so that no
        listener outlives the stop."""
        if self._listener is not None or self.hub.deliver in self.database.subscribers:
            return
        self.hub.closed = False  # a lifespan run again after a stop waits again
        if self.database.dialect_name == "postgresql":
            listen_url = self.database.listen_url
            if listen_url is None:
                # Behind a pooler without a direct URL nothing can listen: waiters look
                # again every POLL_SECONDS instead (app/db/connections.py).
                self.hub.poll_seconds = POLL_SECONDS
                return
            self._listener = notify.PostgresListener(
                self.database.engine, self.hub.deliver, url=listen_url
            )
            self._listener.start()
        else:
            self.database.subscribers.append(self.hub.deliver)

    def stop(self) -> None:
        self.hub.close()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        if self.hub.deliver in self.database.subscribers:
            self.database.subscribers.remove(self.hub.deliver)


@dataclass(frozen=True)
class PullOutcome(Generic[Body]):
    """What one pull attempt found: the job's body (None: nothing now), whether the worker
    should report its metadata, and what a wait needs to know about the worker."""

    job: Body | None
    #: The category of the job taken, when one was.
    category_id: int | None
    refresh: bool
    worker_id: int
    #: False while the worker could take no job at all (inactive, no free slot): then
    #: only news about the worker itself wakes it.
    could_take_work: bool
    #: The job is one the scheduler placed on this worker (delivered before any other).
    placed: bool = False
    #: Seconds until the worker's metadata is due for a refresh: a wait ends then, so the
    #: worker is told to report without waiting for its whole deadline.
    refresh_due_in: float = float("inf")
    #: Waiting pulls the worker may hold: its free slots, at least one (WakeupHub.hold).
    free_slots: int = 1
    #: A newer pull of the same worker took this one's place while it waited.
    superseded: bool = False


#: The answer of a pull superseded before its first attempt: nothing, and no news of its
#: worker (the newer pull that took its place tells it whatever there is).
SUPERSEDED: PullOutcome[Any] = PullOutcome(
    job=None, category_id=None, refresh=False, worker_id=0, could_take_work=False,
    superseded=True,
)  # fmt: skip


async def pull_or_wait(
    hub: WakeupHub,
    pull_once: Callable[[], PullOutcome[Body]],
    wait: float,
    client_gone: Callable[[], Awaitable[None]] | None = None,
    worker: str | None = None,
) -> PullOutcome[Body]:
    """Pull; when nothing came and ``wait`` seconds have not passed, wait for a wake-up
    and pull again. Each attempt runs in the thread pool in a transaction of its own;
    between attempts the request holds neither a thread nor a connection and sends no
    statement. A waiter that loses the race for the job that woke it waits again, until
    its deadline; the answer is then the last attempt's (204). A worker whose metadata
    falls due for a refresh while it waits is answered then, with the refresh header.

    ``client_gone`` returns when the client has disconnected: the wait ends then, and no
    job is taken for nobody. Without it a pull whose worker died waited out its whole
    deadline, and held the server's exit as long: uvicorn waits for every request task
    before it stops, and such a task's connection is no longer there to be told.

    ``worker`` (the worker's name) lets a newer pull of the same worker supersede this one
    once the worker holds more waiting pulls than it has free slots: the answer is then
    this attempt's, marked ``superseded``. Raises WaitingFull, before any attempt, when the
    process holds as many waiting pulls as it may and none of this worker's."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    waiter = hub.register(loop, worker) if wait > 0 and not hub.closed else None
    refresh_was_due: bool | None = None
    outcome: PullOutcome[Body] | None = None
    # Whether the next attempt follows a wake-up: it then goes first at the gate.
    woken = False
    gone = asyncio.Event()
    watcher = None
    if waiter is not None and client_gone is not None:
        watcher = asyncio.create_task(_wake_when_gone(client_gone, gone, waiter))
    try:
        while True:
            # A renewal (the worker's new pull) stands on the worker's last attempt when
            # nothing announced since concerns it (WakeupHub.renew_quietly): no attempt.
            quiet = (
                _quiet_answer(hub, waiter)
                if outcome is None and waiter is not None and worker is not None
                else None
            )
            if quiet is not None:
                outcome = quiet
            elif waiter is None or worker is None:
                if waiter is not None:
                    # Armed before the attempt: what happens during it wakes us after.
                    hub.arm(waiter)
                outcome = await run_in_threadpool(pull_once)
            else:
                async with hub.attempts_of(worker), hub.any_attempt(woken=woken, waiter=waiter):
                    if waiter.superseded:  # while it queued for its turn
                        return replace(outcome, superseded=True) if outcome else SUPERSEDED
                    # Armed as the attempt starts, not before it queued for its turn
                    # (WakeupHub.arm): news that came while it queued is in what the
                    # attempt reads.
                    hub.arm(waiter)
                    outcome = await run_in_threadpool(pull_once)
            if waiter is not None and quiet is None:
                hub.settled(waiter, outcome.category_id)
                if outcome.job is None:
                    hub.remember_quiet(
                        waiter,
                        outcome,
                        worker_id=outcome.worker_id,
                        wants_work=outcome.could_take_work,
                    )
                else:
                    hub.forget_quiet(worker)
            remaining = deadline - loop.time()
            # A refresh that fell due while this pull waited ends the wait, so the worker
            # hears at once that it should report (its report may change what it can run).
            # One already due when the pull came (a worker that never reports, say) does
            # not: the header rides on whatever the pull answers.
            if refresh_was_due is None:
                refresh_was_due = outcome.refresh
            fell_due = outcome.refresh and not refresh_was_due
            if (
                outcome.job is not None
                or fell_due
                or waiter is None
                or remaining <= 0
                or hub.closed
            ):
                return outcome
            if waiter.superseded:
                return replace(outcome, superseded=True)
            waiter.expect(outcome.worker_id, wants_work=outcome.could_take_work)
            hub.hold(waiter, outcome.free_slots)
            # The refresh falling due ends the wait early: the next attempt says so.
            refresh_first = 0 < outcome.refresh_due_in < remaining
            budget = min(remaining, outcome.refresh_due_in + 0.05) if refresh_first else remaining
            # A hub that hears nothing (behind a pooler) is polled: wait a slice, look again.
            wait_now = budget if hub.poll_seconds is None else min(hub.poll_seconds, budget)
            polled = wait_now < budget
            woken = await waiter.wait(wait_now)
            if waiter.superseded:
                return replace(outcome, superseded=True)
            if gone.is_set() or (not woken and not refresh_first and not polled):
                return outcome
    finally:
        if watcher is not None:
            watcher.cancel()
        if waiter is not None:
            hub.unregister(waiter)


def _quiet_answer(hub: WakeupHub, waiter: Waiter) -> PullOutcome[Any] | None:
    """The worker's last empty attempt's answer, when this pull may stand on it, its
    refresh deadline counted from now."""
    quiet = hub.renew_quietly(waiter, _still_good)
    if quiet is None or not isinstance(quiet.answer, PullOutcome):
        return None
    elapsed = time.monotonic() - quiet.started
    return replace(quiet.answer, refresh_due_in=quiet.answer.refresh_due_in - elapsed)


def _still_good(answer: object, elapsed: float) -> bool:
    """An answer whose worker's metadata refresh fell due since is not: the attempt tells
    the worker to report (a refresh already due then rides on the answer as it did)."""
    if not isinstance(answer, PullOutcome):
        return False
    return answer.refresh or answer.refresh_due_in - elapsed > 0


async def client_gone(request: Request) -> None:
    """Return when the request's client has disconnected (past its body, a disconnect is
    the only message the server can still receive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _wake_when_gone(
    client_gone: Callable[[], Awaitable[None]], gone: asyncio.Event, waiter: Waiter
) -> None:
    await client_gone()
    gone.set()
    waiter.wake()
