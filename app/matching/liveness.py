"""Liveness: whether a worker is still heard from.

Every word a worker sends with its own token that the server records (a pull, a finish or
return, a heartbeat, a load or metadata report) stamps ``workers.last_seen``. A worker
whose last word, or its registration if it never spoke, is older than
JOBMATCH_WORKER_TIMEOUT_SECONDS is marked ``unknown`` by the server's sweep
(app/api/lease_sweeper.py), as Grid Engine's qmaster shows a host whose execd stopped
reporting in state ``u`` (unknown) in ``qhost`` and ``qstat -f``. An unknown worker is
not a candidate (``UNAVAILABLE_WORKER_STATES``); its running jobs keep their leases, which
run out on their own clock (app/matching/leases.py).

The next word from it makes it ``active`` again, in the transaction that records the
word: the statement that stamps ``last_seen`` also says whether the worker was unknown,
and only then does :func:`revive` run (one more statement, once per silence). Only
``unknown`` is undone so, and the sweep marks only ``active`` workers, so that neither
ever overrides what an admin set (``draining``, ``disabled``, ``offline``).

The sweep is one UPDATE over all silent workers, never a statement per worker; several
API processes may sweep one PostgreSQL at once: a row another transaction holds (a pull
of that worker, another sweep) is skipped, a row changed meanwhile is checked again, and
each change happens, and is logged, once.

A change of state alone changes nothing cached: misfit and fit rows do not depend on it
and every reader of candidates reads the state live, as for drain and disable
(app/matching/worker_lifecycle.py), so the generation is not bumped. Like any change of
a worker, a mark wakes the worker's waiting pulls (a worker whose pull waits on the
server is alive: the woken pull looks again, which is a word, and revives it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, FromClause, bindparam, func, null, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Worker, WorkerState
from app.db.prebuilt import Prebuilt
from app.db.tables import WORKERS
from app.matching import announce, domain_events

#: Who set the state, in ``state_set_by``, of a worker the server marked unknown.
SERVER = "jobmatch"
#: The explanation's reason code for an unknown worker (app/matching/readiness.py).
REASON_CODE = "worker-unknown"
#: What the code means, for people; the explanation adds when it was last heard from.
MEANING = (
    "the worker has not been heard from (pull, finish, heartbeat or report) within "
    "JOBMATCH_WORKER_TIMEOUT_SECONDS: it gets no new work until it speaks again"
)


def reason(timeout_seconds: float) -> str:
    """The ``state_reason`` the sweep writes."""
    return f"not heard from for more than {timeout_seconds:g} s"


def last_heard(last_seen: datetime | None, registered_at: datetime | None) -> str:
    """When the worker was last heard from, in words."""
    if last_seen is not None:
        return f"last heard from at {last_seen.isoformat()}"
    if registered_at is not None:
        return f"never heard from since its registration at {registered_at.isoformat()}"
    return "never heard from"


def unknown_words(last_seen: datetime | None, registered_at: datetime | None) -> str:
    """The explanation of an unknown worker: what the state means and when it last spoke."""
    return f"{MEANING}; {last_heard(last_seen, registered_at)}"


@dataclass(frozen=True)
class Marked:
    """A worker the sweep marked unknown, and when it was last heard from."""

    worker: str
    last_seen: datetime | None


def _silent_since(workers: FromClause, deadline: ColumnElement[datetime]) -> ColumnElement[bool]:
    """Active, and not heard from since ``deadline``: a worker that never spoke counts its
    silence from its registration."""
    return (workers.c.state == WorkerState.ACTIVE) & (
        func.coalesce(workers.c.last_seen, workers.c.created_at) < deadline
    )


def mark_silent(
    session: Session, *, timeout_seconds: float, now: datetime | None = None
) -> list[Marked]:
    """Mark ``unknown`` every active worker not heard from for ``timeout_seconds``, in one
    UPDATE; the workers it marked. Rows locked by another transaction are left for the
    next sweep (on PostgreSQL): a pull that holds its worker's row is a word from it."""
    now = now or utcnow()
    deadline = bindparam(
        "p_deadline", now - timedelta(seconds=timeout_seconds), WORKERS.c.last_seen.type
    )
    # The ids first, locked in id order as every writer of several workers locks them
    # (app/matching/dispatch/pull.py lock_workers), so that two sweeps cannot deadlock;
    # an alias, or the subquery would be correlated with the UPDATE's own table.
    found = WORKERS.alias("silent")
    silent = (
        select(found.c.id)
        .where(_silent_since(found, deadline))
        .order_by(found.c.id)
        .with_for_update(skip_locked=True)
    )
    rows = session.execute(
        update(WORKERS)
        .where(WORKERS.c.id.in_(silent.scalar_subquery()), _silent_since(WORKERS, deadline))
        .values(
            state=WorkerState.UNKNOWN,
            state_reason=reason(timeout_seconds),
            state_set_by=SERVER,
            state_changed_at=now,
            updated_at=now,
        )
        .returning(WORKERS.c.id, WORKERS.c.name, WORKERS.c.last_seen)
    ).all()
    announce.workers_changed(session, [worker_id for worker_id, _name, _seen in rows])
    marked = sorted((Marked(name, seen) for _id, name, seen in rows), key=lambda m: m.worker)
    for one in marked:
        domain_events.worker_event(
            session,
            "state_changed",
            one.worker,
            previous=WorkerState.ACTIVE.value,
            state=WorkerState.UNKNOWN.value,
            reason=reason(timeout_seconds),
            by=SERVER,
        )
    return marked


#: The worker named ``p_name`` was unknown and is heard from at ``p_now``: active again,
#: the reason of the old state cleared, set by the worker itself. Run after the statement
#: that stamped ``last_seen`` and locked the row, in the same transaction.
REVIVE = (
    update(WORKERS)
    .where(WORKERS.c.name == bindparam("p_name"), WORKERS.c.state == WorkerState.UNKNOWN)
    .values(
        state=WorkerState.ACTIVE,
        state_reason=null(),
        state_set_by=bindparam("p_name"),
        state_changed_at=bindparam("p_now"),
        updated_at=bindparam("p_now"),
    )
    .returning(WORKERS.c.id)
)
#: :data:`REVIVE` for the express lane's Core connections (app/matching/dispatch/express.py).
REVIVE_PREBUILT = Prebuilt(REVIVE)


def revive(session: Session, worker_name: str, now: datetime) -> bool:
    """The unknown worker ``worker_name`` spoke: make it active again and log the change
    once the transaction commits. Whether it was unknown (another transaction may have
    revived it first)."""
    revived = session.execute(REVIVE, {"p_name": worker_name, "p_now": now}).first()
    if revived is None:
        return False
    note_revived(session, worker_name)
    return True


def note_revived(session: Session | None, worker_name: str) -> None:
    """Log the return of ``worker_name`` to ``active`` (once ``session`` commits; at once
    without one: the express lane calls it after its own commit)."""
    domain_events.worker_event(
        session,
        "state_changed",
        worker_name,
        previous=WorkerState.UNKNOWN.value,
        state=WorkerState.ACTIVE.value,
        reason=None,
        by=worker_name,
    )


def heard_from(session: Session, worker: Worker, now: datetime | None = None) -> None:
    """The worker (its row locked by this transaction) spoke: stamp ``last_seen``, and
    make it active again if it was unknown."""
    now = now or utcnow()
    worker.last_seen = now
    if worker.state is WorkerState.UNKNOWN:
        worker.state = WorkerState.ACTIVE
        worker.state_reason = None
        worker.state_set_by = worker.name
        worker.state_changed_at = now
        note_revived(session, worker.name)
