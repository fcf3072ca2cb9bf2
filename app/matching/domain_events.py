"""Domain events: every change of a job's or a worker's state, logged once it is committed.

The services note an event where the change happens (``history.record`` for most job
changes, the dispatch and finish statements for the fast paths, the worker services for
registrations, state changes and deletions). Nothing is logged until the transaction
commits: a transaction that rolls back, or loses a race and runs again
(app/api/retries.py), logs nothing of its failed runs, so each line is a change that
happened. The counters that follow such changes (lease expiries, requeues, the wait
before dispatch) are counted at the same moment, for the same reason.

Each event is one log record of the logger ``app.events`` at INFO, its message the event's
name (``job.dispatched``, ``worker.deleted``, ...) and its fields as extra attributes, which
the JSON log format turns into fields of the line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from app.db.models import JobEventKind
from app.metrics import LEASE_EXPIRIES, REQUEUES

log = logging.getLogger("app.events")

#: Where a session keeps what it runs once committed.
_PENDING = "jobmatch_after_commit"

#: Why a job was requeued (or failed) by the server rather than by its worker.
LEASE_EXPIRED = "lease_expired"
WORKER_DELETED = "worker_deleted"


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run ``action`` once the session's transaction commits; never if it rolls back."""
    session.info.setdefault(_PENDING, []).append(action)


def _emit(name: str, fields: dict[str, Any]) -> None:
    log.info(name, extra={"event": name, **fields})


def job_event(
    session: Session | None,
    kind: JobEventKind,
    job_id: int,
    *,
    worker: str | None = None,
    detail: str | None = None,
    cause: str | None = None,
) -> None:
    """Log ``job.<kind>`` once ``session``'s transaction commits, or at once without a
    session (a change committed without one: app/matching/dispatch/express.py);
    ``cause`` says why the server (not the job's worker) changed it: ``lease_expired`` or
    ``worker_deleted``."""
    if cause is None and not log.isEnabledFor(logging.INFO):
        # Nothing to log and no counter to move: a batch of jobs skips building the
        # record's fields (and, with a session, its after-commit hook) per job.
        return
    given = {"job_id": job_id, "worker": worker, "detail": detail, "cause": cause}
    fields = {name: value for name, value in given.items() if value is not None}

    def emit() -> None:
        _emit(f"job.{kind.value}", fields)
        if cause == LEASE_EXPIRED:
            LEASE_EXPIRIES.labels(kind.value).inc()
        if kind is JobEventKind.REQUEUED and cause is not None:
            REQUEUES.labels(cause).inc()

    if session is None:
        emit()
    else:
        after_commit(session, emit)


def worker_event(session: Session | None, what: str, name: str, **fields: Any) -> None:
    """Log ``worker.<what>`` (registered, updated, state_changed, deleted) after commit,
    or at once without a session (a change committed without one, as for
    :func:`job_event`)."""
    given = {"worker": name, **fields}
    if session is None:
        _emit(f"worker.{what}", given)
    else:
        after_commit(session, lambda: _emit(f"worker.{what}", given))


@event.listens_for(Session, "after_commit")
def _run_pending(session: Session) -> None:
    for action in session.info.pop(_PENDING, ()):
        try:
            action()
        except Exception:  # a log or a counter must never turn a commit into an error
            log.exception("after-commit action failed")


@event.listens_for(Session, "after_rollback")
def _drop_pending(session: Session) -> None:
    session.info.pop(_PENDING, None)
