"""The end of a job that holds no inventory vertices, in a few statements built once.

Most jobs end holding only queue-instance slots (and sometimes Grid Engine consumables):
such an end is a handful of UPDATEs, which ``dispatch.finish`` used to run through ORM
objects and a flush, about fourteen statements in all. Here it is two on PostgreSQL (the
worker's lock, then one statement of data-modifying CTEs) and five or six on SQLite. The same
lock order holds as everywhere: the worker, then the job, then its queue instances, then
consumables. A job that holds vertices (which may sit on other workers, whose rows must
be locked first), an unknown worker, or a job that is not running on this worker goes the
general way (``dispatch.finish``), which also words the errors.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import String, bindparam, exists, func, literal, select, true, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session

from app.db import dialect, notify
from app.db.models import (
    InventoryBooking,
    Job,
    JobBooking,
    JobEventKind,
    JobState,
    QuotaBooking,
    WorkerState,
)
from app.db.tables import ALLOCATIONS, JOB_EVENTS, JOBS, QUEUE_INSTANCES, WORKERS
from app.matching import liveness
from app.matching.dispatch.finish_parts import (
    end_values,
    give_back_slots,
    record_end,
    record_end_of,
    runs_on,
)
from app.matching.errors import ConflictError
from app.matching.gridengine.bookings import release_bookings
from app.matching.wakeups import ROOM, room_changed

_JOB: Any = bindparam("p_job_id")
_NOW: Any = bindparam("p_now")


def _holds_vertices() -> Any:
    return exists().where(InventoryBooking.job_id == _JOB, InventoryBooking.released_at.is_(None))


# Lock the worker and learn whether the job holds vertices. The answer may predate a
# commit that this statement waited for; the check after the job's lock decides.
#
# The workers the job holds vertices on are locked with it, all in id order (the order
# every multi-worker writer uses), before the reporting worker's row is written: a
# multi-node job is finished from one of its workers, and locking that one first and the
# others after let two finishes of jobs sharing workers 3 and 5, reported from 5 and from
# 3, each wait for the other (a deadlock, seen through PgBouncer by
# tests/matching/allocation/test_concurrency.py). For a job holding only slots the set is
# the reporting worker alone.
_REPORTER = WORKERS.c.name == bindparam("p_name")
_IN_ORDER = (
    select(WORKERS.c.id)
    .where(
        _REPORTER
        | WORKERS.c.id.in_(
            select(InventoryBooking.worker_id).where(
                InventoryBooking.job_id == _JOB, InventoryBooking.released_at.is_(None)
            )
        )
    )
    .order_by(WORKERS.c.id)
    .with_for_update()
    .subquery("in_order")
)
LOCK_REPORTER = (
    update(WORKERS)
    .where(_REPORTER, WORKERS.c.id == _IN_ORDER.c.id)
    .values(last_seen=_NOW, updated_at=_NOW)
    # Whether the worker was unknown: the report is a word from it, which makes it
    # active again (app/matching/liveness.py).
    .returning(WORKERS.c.id, _holds_vertices(), WORKERS.c.state == WorkerState.UNKNOWN)
)

#: The express finish's lock (app/matching/dispatch/express.py): the reporting worker
#: alone, without :data:`LOCK_REPORTER`'s ordered ``FOR UPDATE`` of the workers the job
#: holds vertices on (a lock record in the WAL, a sort and a join on every finish). The
#: express way ends only a job that holds no vertices (:data:`END_BY_NAME_CORE` checks
#: it after this lock) and never locks another worker, so it cannot take two workers'
#: locks out of order; a job that holds vertices is left to the general way, in a
#: transaction of its own that locks them all in id order. Same columns as LOCK_REPORTER.
LOCK_REPORTER_ALONE = (
    update(WORKERS)
    .where(_REPORTER)
    .values(last_seen=_NOW, updated_at=_NOW)
    .returning(WORKERS.c.id, _holds_vertices(), WORKERS.c.state == WorkerState.UNKNOWN)
)


def _end(failed: bool, worker_id: Any = None) -> Any:
    return (
        update(JOBS)
        .where(
            JOBS.c.id == _JOB,
            runs_on(bindparam("p_worker_id") if worker_id is None else worker_id),
            JOBS.c.state == JobState.RUNNING,
        )
        .values(**end_values(failed, _NOW))
        .returning(*JOBS.c)
    )


_END = {failed: select(Job).from_statement(_end(failed)) for failed in (False, True)}

# After the job's lock nothing can book for it any more: this answer is exact.
_HOLDINGS = select(
    _holds_vertices(),
    # Consumables or resource quotas, both given back by release_bookings().
    exists().where(JobBooking.job_id == _JOB) | exists().where(QuotaBooking.job_id == _JOB),
)

_OPEN = (ALLOCATIONS.c.job_id == _JOB) & ALLOCATIONS.c.released_at.is_(None)

# PostgreSQL: the allocations end and give their slots back in one statement.
_RELEASE_IN_ONE = give_back_slots(_JOB, _NOW)

# SQLite: the slots first (read from the open allocations), then the allocations.
_GIVE_BACK_SLOTS = (
    update(QUEUE_INSTANCES)
    .where(QUEUE_INSTANCES.c.id.in_(select(ALLOCATIONS.c.queue_instance_id).where(_OPEN)))
    .values(
        used_slots=QUEUE_INSTANCES.c.used_slots
        - select(func.sum(ALLOCATIONS.c.slots))
        .where(_OPEN, ALLOCATIONS.c.queue_instance_id == QUEUE_INSTANCES.c.id)
        .scalar_subquery()
    )
)
_END_ALLOCATIONS = update(ALLOCATIONS).where(_OPEN).values(released_at=_NOW)

_RECORD = record_end(_JOB, _NOW, bindparam("p_kind"))


def _end_in_one(
    failed: bool, worker_id: Any = None, announce: Any = None, quiet: bool = False
) -> Any:
    """PostgreSQL: the job's end, its slots given back and its event recorded in one
    statement of data-modifying CTEs, for a job that holds slots only.

    It runs after :data:`LOCK_REPORTER`, in a statement of its own: under READ COMMITTED a
    statement reads with a snapshot taken when it starts, so a lock taken inside this
    statement would leave the rest reading what was there before the lock was granted
    (a pull of this worker that committed meanwhile would go unseen). Taken by the
    statement before, the lock precedes this snapshot, and every writer of this worker's
    running jobs, allocations and queue instances holds it: what this statement reads
    of them is final. The job ends only when it holds no vertices, consumables or quota
    bookings (those are given back by the steps of :func:`finish_slots_only` and
    finish_pg.py); then no row comes back and those steps decide, nothing changed.

    ``worker_id`` and ``announce`` are the parameters ``p_worker_id`` and ``p_announce``
    unless given (see :data:`END_BY_NAME_CORE`); ``quiet`` leaves the announcement to a
    later statement of the transaction (:data:`END_BY_NAME_QUIETLY`)."""
    ended = (
        _end(failed, worker_id)
        .where(
            ~_holds_vertices(),
            ~exists().where(JobBooking.job_id == _JOB),
            ~exists().where(QuotaBooking.job_id == _JOB),
        )
        .cte("ended")
    )
    kind = JobEventKind.FAILED if failed else JobEventKind.FINISHED
    give_back = give_back_slots(select(ended.c.id).scalar_subquery(), _NOW)
    record = record_end_of(ended, _NOW, literal(kind, JOB_EVENTS.c.kind.type))
    if quiet:
        return select(*ended.c).add_cte(give_back.cte("give_back"), record.cte("record"))
    # The worker's room changed: announced here, in the round trip this statement makes
    # anyway (sent at the commit, as every notification); a SELECT in WITH runs only when
    # the answer reads it.
    announced = (
        select(
            notify.notify_column(
                bindparam("p_announce", type_=String) if announce is None else announce
            )
        )
        .select_from(ended)
        .cte("announced")
    )
    return (
        select(*ended.c, *announced.c)
        .select_from(ended.outerjoin(announced, true()))
        .add_cte(give_back.cte("give_back"), record.cte("record"))
    )


#: The Core statement of :func:`_end_in_one`: the ended job's columns, then the
#: announcement (app/matching/dispatch/express.py runs it without the ORM).
END_IN_ONE_CORE = {failed: _end_in_one(failed) for failed in (False, True)}
_END_IN_ONE = {
    failed: select(Job).from_statement(statement) for failed, statement in END_IN_ONE_CORE.items()
}

# The reporting worker by name, read in the statement itself.
_REPORTER_ID = select(WORKERS.c.id).where(_REPORTER).scalar_subquery()

#: :data:`END_IN_ONE_CORE` given the worker's name (``p_name``) instead of its id, so
#: that it can be sent with :data:`LOCK_REPORTER` in one round trip
#: (app/matching/dispatch/express.py pipelines them). It still reads after the lock:
#: PostgreSQL runs a pipeline's statements one after the other, each with the snapshot
#: of its own start. An unknown name matches no job, and a job holding vertices is left
#: as :func:`_end_in_one` leaves it.
END_BY_NAME_CORE = {
    failed: _end_in_one(
        failed, _REPORTER_ID, literal(ROOM, String) + sql_cast(_REPORTER_ID, String)
    )
    for failed in (False, True)
}
#: :data:`END_BY_NAME_CORE` without the announcement: the ended job's columns only. A
#: batch that carries one report (app/matching/dispatch/express.py's batch_on_loop)
#: announces the worker's room with the job its take starts, in one notification.
END_BY_NAME_QUIETLY = {
    failed: _end_in_one(failed, _REPORTER_ID, quiet=True) for failed in (False, True)
}


def finish_slots_only(
    session: Session,
    job_id: int,
    worker_name: str,
    failed: bool,
    reason: str | None,
    exit_code: int | None,
    output: str | None,
    now: datetime,
) -> Job | None:
    """End a running job that holds no vertices: the ended Job, or None when the general
    path must decide (no such worker, the job holds vertices, or it is not running on
    this worker), in which case nothing was changed but the worker's ``last_seen``."""
    row = session.execute(LOCK_REPORTER, {"p_name": worker_name, "p_now": now, "p_job_id": job_id})
    locked = row.one_or_none()
    if locked is not None and locked[2]:
        liveness.revive(session, worker_name, now)
    if locked is None or locked[1]:
        return None
    ending = {
        "p_job_id": job_id,
        "p_worker_id": locked[0],
        "p_now": now,
        "p_exit_code": exit_code,
        "p_output": output,
        "p_reason": reason or "the worker reported failure",
    }
    one_statement = dialect.supports_writing_ctes(session.connection())
    if one_statement:
        room = room_changed(locked[0])
        ended: Job | None = session.execute(
            _END_IN_ONE[failed],
            {**ending, "p_worker": worker_name, "p_detail": reason, "p_announce": room},
            execution_options={"populate_existing": True},
        ).scalar_one_or_none()
        if ended is not None:
            notify.sent_by_statement(session, room)
            return ended
    job: Job | None = session.execute(
        _END[failed], ending, execution_options={"populate_existing": True}
    ).scalar_one_or_none()
    if job is None:
        return None
    holds_vertices, holds_consumables = session.execute(_HOLDINGS, {"p_job_id": job_id}).one()
    if holds_vertices:
        # Dispatched again (with vertices) between the two statements above.
        raise ConflictError(f"job {job_id} started while it was being finished; retry")
    if one_statement:
        session.execute(_RELEASE_IN_ONE, {"p_job_id": job_id, "p_now": now})
    else:
        session.execute(_GIVE_BACK_SLOTS, {"p_job_id": job_id})
        session.execute(_END_ALLOCATIONS, {"p_job_id": job_id, "p_now": now})
    if holds_consumables:
        release_bookings(session, job_id)
    session.execute(
        _RECORD,
        {
            "p_job_id": job_id,
            "p_kind": JobEventKind.FAILED if failed else JobEventKind.FINISHED,
            "p_worker": worker_name,
            "p_detail": reason,
            "p_now": now,
        },
    )
    return job
