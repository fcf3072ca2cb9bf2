"""The background thread that expires leases while the server runs.

Downtime of the server is not silence of its workers: while no server process runs, a
worker's pulls and heartbeats fail, its ``last_seen`` ages, and a sweep right after the
restart would take the jobs of workers that are alive and still running them. So each
sweeping process expires nothing until ``lease_seconds`` have passed since it started:
every worker gets a full lease, counted from the moment it could be heard again.

The grace is per process, not per service: it needs no shared record of "the server's
start" (which a crashed process could not update), and it is always safe. A process that
starts while others keep running waits a lease before it sweeps; the others go on
sweeping, which is right, as the workers could reach the service all along.

The same sweep marks silent workers ``unknown`` (app/matching/liveness.py), with a grace of
its own for the same reason: nothing is marked until ``worker_timeout_seconds`` have
passed since the process started. It runs at least twice per timeout, whatever
``lease_sweep_seconds`` says, so that a worker is marked within one and a half timeouts
of its last word.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from app.db.engine import Database
from app.matching.leases import expire_leases
from app.matching.liveness import mark_silent
from app.settings import Settings

log = logging.getLogger(__name__)

#: The shortest period a worker timeout alone makes the sweep run at, in seconds.
MIN_PERIOD = 1.0


class LeaseSweeper:
    """Every :meth:`period` seconds, requeue the jobs of silent workers and mark those
    silent past their timeout unknown. Several server processes may each run one: row
    locks make the sweeps safe to overlap."""

    def __init__(
        self,
        database: Database,
        settings: Settings,
        *,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.database = database
        self.settings = settings
        #: Whether the database can be swept now (its schema at head); None: always.
        self.ready = ready
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()

    def start(self) -> None:
        """Start sweeping; an app's lifespan may run more than once, so each start makes a
        thread of its own."""
        if self.settings.lease_sweep_seconds <= 0 or self._thread is not None:
            return
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, args=(self._stop,), name="lease-sweeper", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def period(self) -> float:
        """Seconds between sweeps: ``lease_sweep_seconds``, and at most half the worker
        timeout (when there is one), so that marking lags a timeout by half of one at
        most; a tiny timeout does not make the sweep spin (once a second at most, unless
        ``lease_sweep_seconds`` asks for more)."""
        timeout = self.settings.worker_timeout_seconds
        if timeout <= 0:
            return self.settings.lease_sweep_seconds
        return min(self.settings.lease_sweep_seconds, max(timeout / 2, MIN_PERIOD))

    def in_grace(self) -> bool:
        """Whether less than a lease has passed since this process started sweeping."""
        return time.monotonic() - self._started < self.settings.lease_seconds

    def in_liveness_grace(self) -> bool:
        """Whether less than a worker timeout has passed since this process started
        sweeping (or the timeout is 0: workers are never marked)."""
        timeout = self.settings.worker_timeout_seconds
        return timeout <= 0 or time.monotonic() - self._started < timeout

    def sweep(self) -> int:
        """Mark silent workers unknown, once a worker timeout has passed since the
        start; expire the leases of silent workers, once a lease has passed. The number
        of leases expired."""
        self.mark_silent()
        if self.in_grace():
            return 0
        with self.database.transaction() as session:
            expired = expire_leases(
                session,
                lease=timedelta(seconds=self.settings.lease_seconds),
                max_attempts=self.settings.max_attempts,
            )
        for lease in expired:
            log.warning(
                "lease of job %s on worker %s expired: now %s",
                lease.job_id,
                lease.worker,
                lease.outcome.value,
            )
        return len(expired)

    def mark_silent(self) -> int:
        """Mark unknown the workers silent past their timeout; how many were marked."""
        if self.in_liveness_grace():
            return 0
        with self.database.transaction() as session:
            marked = mark_silent(session, timeout_seconds=self.settings.worker_timeout_seconds)
        for worker in marked:
            heard = worker.last_seen.isoformat() if worker.last_seen else "never"
            log.warning("worker %s is unknown: last heard from %s", worker.worker, heard)
        return len(marked)

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.period()):
            if self.ready is not None and not self.ready():
                continue  # the gate logged why at start; a sweep would only fail
            try:
                self.sweep()
            except Exception:  # the sweeper must outlive a failed sweep (e.g. busy database)
                log.exception("lease sweep failed")
