"""The end of a job that holds inventory vertices, in two statements on PostgreSQL
(issue 9).

``dispatch.finish`` first tries finish_sql.finish_slots_only, which locks the reporting
worker and the workers the job holds vertices on (in id order) and hands over when the job
holds vertices. The general path then took
about nineteen statements: the booked workers read twice, locked, the job locked, the
allocations read and released one by one, the bookings read, every shared hold and draw
undone one by one, the counts moved, the job, its event and the worker written by a
flush. Here:

1. one statement locks the booked workers (in id order) and then the job, only when the
   job is running on the reporting worker, and says whether the job's bookings may be
   undone together (no vertex shared or drawn twice or inside one of its exclusive
   holds: never, as allocation.Placement.bookings gives them) and whether it holds Grid
   Engine consumables;
2. one statement of data-modifying CTEs ends the bookings, frees the exclusive holds,
   undoes shared holds and draws, moves the free counts and untouched counters by what
   those UPDATEs returned (as inventory.release does), releases the allocations and
   gives their slots back, ends the job and records the event; it returns the job and
   the workers whose vertices it freed, which must all be locked (else the job started
   while it was being finished: ConflictError, and the transaction rolls back).

Anything else (SQLite, an unknown worker, a job not running there, bookings that
cannot be undone together) goes the general way, which also words the errors.
"""

from __future__ import annotations

import operator
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Integer,
    alias,
    and_,
    any_,
    bindparam,
    exists,
    func,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from app.db import dialect
from app.db.models import InventoryBooking, Job, JobBooking, JobEventKind, JobState, QuotaBooking
from app.db.tables import (
    INVENTORY_BOOKINGS,
    INVENTORY_VERTICES,
    JOBS,
    WORKERS,
)
from app.matching.allocation.book_pg import move_counters, units_per_count_row
from app.matching.dispatch.finish_parts import end_values, give_back_slots, record_end
from app.matching.errors import ConflictError
from app.matching.gridengine.bookings import release_bookings

_JOB: Any = bindparam("p_job_id", type_=Integer)
_NOW: Any = bindparam("p_now")
_ZERO: Any = literal_column("0")
_b = INVENTORY_BOOKINGS.c
_v = INVENTORY_VERTICES.c
_ACTIVE = and_(_b.job_id == _JOB, _b.released_at.is_(None))


def _lock() -> Any:
    booked = select(_b.worker_id).where(_ACTIVE)
    # A join with the distinct booked workers, not ``id IN (...)``: with FOR UPDATE,
    # PostgreSQL answered the IN with a hash semi join over a sequential scan of every
    # worker (0.5 ms of a 0.8 ms lock at 4,096 nodes, auto_explain); the join seeks each
    # worker by its key.
    booked_workers = booked.distinct().subquery("booked_workers")
    locked = (
        select(WORKERS.c.id)
        .join(booked_workers, WORKERS.c.id == booked_workers.c.worker_id)
        .order_by(WORKERS.c.id)
        .with_for_update(of=WORKERS)
        .subquery("locked")
    )
    # Bookings that one statement could not undo: a vertex the job shares or draws from
    # twice, or inside a subtree it holds exclusively (an UPDATE changes a row once).
    other = aliased(InventoryBooking)
    held = INVENTORY_VERTICES.alias("held")
    overlapping = exists().where(
        _ACTIVE,
        _b.mode != "exclusive",
        exists().where(
            other.job_id == _JOB,
            other.released_at.is_(None),
            other.vertex_id == _b.vertex_id,
            other.id != _b.id,
        )
        | exists().where(held.c.id == _b.vertex_id, held.c.held_by == _JOB),
    )
    return (
        select(
            select(func.array_agg(WORKERS.c.id))
            .where(WORKERS.c.id.in_(booked))
            .scalar_subquery()
            .label("booked"),
            overlapping.label("overlapping"),
            # Consumables or resource quotas, both given back by release_bookings().
            (
                exists().where(JobBooking.job_id == _JOB)
                | exists().where(QuotaBooking.job_id == _JOB)
            ).label("consumables"),
            # The release statement that follows in the transaction is planned the same
            # whatever its parameters; under the default plan cache mode PostgreSQL planned
            # it afresh on every execution (1.1 ms of planning at 4,096 nodes, against
            # 0.9 ms of running it: its generic plan looks dearer only because it cannot
            # see the arrays' lengths). Its generic plan seeks each row by key
            # (tests/matching/allocation/test_generic_plans.py).
            dialect.generic_plans_from_here().label("generic"),
        )
        .select_from(JOBS)
        .where(
            JOBS.c.id == _JOB,
            JOBS.c.state == JobState.RUNNING,
            JOBS.c.worker_id
            == select(WORKERS.c.id).where(WORKERS.c.name == bindparam("p_name")).scalar_subquery(),
            # Evaluated once, before any job row is read: the workers are locked first.
            select(func.count()).select_from(locked).scalar_subquery() >= 0,
        )
        .with_for_update(of=JOBS)
    )


_LOCK = _lock()


def _release(failed: bool) -> Any:
    """Step 2 of the module docstring, for a job that ``failed`` or succeeded: one
    statement of data-modifying CTEs that undoes every booking of the job and ends it.
    Long because it is one statement: each CTE reads what the UPDATEs before it returned,
    so it reads best top to bottom in one place."""
    # Short aliases: psycopg re-parses statements longer than 4,096 characters on every
    # execution (it caches only shorter ones).
    eb: Any = alias(INVENTORY_BOOKINGS, "eb")
    ended = (
        update(eb)
        .where(eb.c.job_id == _JOB, eb.c.released_at.is_(None))
        .values(released_at=_NOW)
        .returning(eb.c.vertex_id, eb.c.worker_id, eb.c.mode, eb.c.amount)
        .cte("ended")
    )
    hv: Any = alias(INVENTORY_VERTICES, "hv")
    unheld = (
        update(hv)
        .where(
            hv.c.worker_id == any_(bindparam("p_workers", type_=ARRAY(Integer))),
            hv.c.held_by == _JOB,
        )
        .values(held_by=None)
        .returning(hv.c.worker_id, hv.c.type, hv.c.unit, hv.c.size)
        .cte("unheld")
    )
    shares = (
        select(ended.c.vertex_id, func.count().label("n"))
        .where(ended.c.mode == "shared")
        .group_by(ended.c.vertex_id)
        .subquery("shares")
    )
    sv: Any = alias(INVENTORY_VERTICES, "sv")
    unshared = (
        update(sv)
        .where(sv.c.id == shares.c.vertex_id)
        .values(shared=sv.c.shared - shares.c.n)
        .returning(sv.c.worker_id, sv.c.shared, sv.c.used, sv.c.held_by)
        .cte("unshared")
    )
    draws = (
        select(ended.c.vertex_id, func.sum(ended.c.amount).label("amount"))
        .where(ended.c.mode == "draw")
        .group_by(ended.c.vertex_id)
        .subquery("draws")
    )
    dv: Any = alias(INVENTORY_VERTICES, "dv")
    undrawn = (
        update(dv)
        .where(dv.c.id == draws.c.vertex_id)
        .values(used=dv.c.used - draws.c.amount)
        .returning(
            dv.c.worker_id,
            dv.c.type,
            dv.c.unit,
            dv.c.shared,
            dv.c.used,
            dv.c.held_by,
            draws.c.amount,
        )
        .cte("undrawn")
    )
    per_key = units_per_count_row(unheld, undrawn, "back")
    # Vertices untouched again: every row held (held rows have shared = 0 and used = 0),
    # shared and drawn vertices that nobody uses any more.
    one: Any = literal_column("1")
    fresh = union_all(
        select(unheld.c.worker_id, one.label("n")),
        select(unshared.c.worker_id, one).where(
            unshared.c.shared == _ZERO, unshared.c.used == _ZERO, unshared.c.held_by.is_(None)
        ),
        select(undrawn.c.worker_id, one).where(
            undrawn.c.shared == _ZERO, undrawn.c.used == _ZERO, undrawn.c.held_by.is_(None)
        ),
    ).subquery("fresh")
    move_free, move_untouched = move_counters(per_key, fresh, operator.add)
    give_back = give_back_slots(_JOB, _NOW)
    record = record_end(_JOB, _NOW, JobEventKind.FAILED if failed else JobEventKind.FINISHED)
    touched = select(func.array_agg(ended.c.worker_id.distinct())).scalar_subquery()
    # The job's end is the main statement: it returns the job and the workers whose
    # vertices were freed.
    return (
        update(JOBS)
        .where(JOBS.c.id == _JOB)
        .values(**end_values(failed, _NOW))
        .returning(*JOBS.c, touched.label("touched"))
        .add_cte(
            move_free.cte("move_free"),
            move_untouched.cte("move_untouched"),
            give_back.cte("give_back"),
            record.cte("record"),
        )
    )


_RELEASE = {failed: _release(failed) for failed in (False, True)}
_RELEASE_JOB = {
    failed: select(Job, literal_column("touched")).from_statement(statement)
    for failed, statement in _RELEASE.items()
}


def finish_holding_vertices(
    session: Session,
    job_id: int,
    worker_name: str,
    failed: bool,
    reason: str | None,
    exit_code: int | None,
    output: str | None,
    now: datetime,
) -> Job | None:
    """End a running job that holds vertices, its reporting worker already locked: the
    ended Job, or None (nothing changed) when the general path must decide."""
    locked = session.execute(_LOCK, {"p_job_id": job_id, "p_name": worker_name}).one_or_none()
    if locked is None or locked.overlapping:
        return None
    workers = list(locked.booked or [])
    row = session.execute(
        _RELEASE_JOB[failed],
        {
            "p_job_id": job_id,
            "p_workers": workers,
            "p_now": now,
            "p_exit_code": exit_code,
            "p_output": output,
            "p_reason": reason or "the worker reported failure",
            "p_worker": worker_name,
            "p_detail": reason,
        },
        execution_options={"populate_existing": True},
    ).one()
    job, touched = row
    if not set(touched or []) <= set(workers):
        # Booked on a worker this transaction did not lock: it started meanwhile.
        raise ConflictError(f"job {job_id} started while it was being finished; retry")
    if locked.consumables:
        release_bookings(session, job_id)
    result: Job = job
    return result
