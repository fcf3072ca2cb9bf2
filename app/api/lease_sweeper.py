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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from app.db.engine import Database
from app.matching.leases import expire_leases
from app.settings import Settings

log = logging.getLogger(__name__)


class LeaseSweeper:
    """Every ``lease_sweep_seconds``, requeue the jobs of silent workers. Several server
    processes may each run one: row locks make the sweeps safe to overlap."""

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

    def in_grace(self) -> bool:
        """Whether less than a lease has passed since this process started sweeping."""
        return time.monotonic() - self._started < self.settings.lease_seconds

    def sweep(self) -> int:
        """Expire the leases of silent workers, once a lease has passed since the start."""
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

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.settings.lease_sweep_seconds):
            if self.ready is not None and not self.ready():
                continue  # the gate logged why at start; a sweep would only fail
            try:
                self.sweep()
            except Exception:  # the sweeper must outlive a failed sweep (e.g. busy database)
                log.exception("lease sweep failed")
