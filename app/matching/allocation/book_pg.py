"""The scheduler's writes for an allocated job in one statement on PostgreSQL (issue 9).

After the placement is computed, one statement locks the workers (in id order) and
starts the job, as every writer locks them first, then takes a room on the leader's
queue instances, its allocation row, every vertex booking (exclusive runs, shared holds,
pool draws), the booking rows, and the free counts and untouched counters moved by what
the UPDATEs changed. Statement by statement that is ten round trips and more (one UPDATE
per run of positions: a 16-node job sent 33); here it is one, with data-modifying CTEs
over arrays (``unnest``).

Every vertex UPDATE keeps the condition of its one-by-one form (inventory.book_placement), so a
vertex taken meanwhile is simply not changed; the statement returns how many rows each
changed and the caller raises ConflictError (rolling the transaction back) when one
changed fewer than it must. The CTEs all work on the statement's snapshot and must not
touch one row twice: exclusive runs, shared vertices and pools are disjoint by
construction (allocation.Placement.bookings), and the caller checks it before choosing
this path. Draws of one pool are summed first (an UPDATE ... FROM changes a row once).

The locks come first although they sit in the same statement as the writes: the first
CTE locks the workers in a one-time filter, then starts the job if it is still waiting
(its UPDATE locks its row), and returns a row only then; every other write is conditional
on that row (an uncorrelated EXISTS, evaluated before the write reads its first row) or
joins it, so no row is written before the locks are granted, and a row is locked only
when it is written. So the lock order of all writers holds (no deadlock), and a job that
stopped waiting gets nothing written. The statement's snapshot is taken before the locks
are granted: what a concurrent transaction committed meanwhile is seen by the conditional
UPDATEs (PostgreSQL re-checks their conditions on the latest version of a row it must
wait for) and otherwise costs a conflict, as a placement found before the lock always
could. This saves the separate locking round trip.

The statement's times (the job's start, its allocation's and its bookings') are taken
after the locks, not from the caller: the job's UPDATE computes ``started_at`` as the
later of ``clock_timestamp()`` and ``:p_now`` once the workers are locked, and the other
writes copy it. A time taken before the statement could precede the release it waited
for, and the books would show a vertex held twice at once (the concurrency test caught
it: job A booked "before" job B released). Every writer stamps with the same clock (the
hosts' clocks agree, as they must for the books of any two writers to compare).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    alias,
    any_,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal_column,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from app.db.models import Job, JobState
from app.db.tables import (
    ALLOCATIONS,
    INVENTORY_BOOKINGS,
    INVENTORY_COUNTS,
    INVENTORY_VERTICES,
    JOBS,
    WORKER_INVENTORIES,
    WORKERS,
)
from app.matching.allocation.bookings import BookingPlan
from app.matching.slots import WAITING, book_room_statement

# Short aliases and literal constants (a bound constant renders as %(name)s::TYPE):
# psycopg re-parses statements longer than 4,096 characters on every execution (it
# caches only shorter ones), which cost 0.3 ms here.
# tests/matching/allocation/test_book_pg.py checks the length.
_HV: Any = alias(INVENTORY_VERTICES, "hv")
_SV: Any = alias(INVENTORY_VERTICES, "sv")
_DV: Any = alias(INVENTORY_VERTICES, "dv")
_JOB: Any = bindparam("p_job_id", type_=Integer)
_ZERO: Any = literal_column("0")
_ONE: Any = literal_column("1")
_EMPTY: Any = literal_column("''")
_NOW: Any = bindparam("p_now")


def _ints(name: str) -> Any:
    return bindparam(name, type_=ARRAY(BigInteger))


def units_per_count_row(held: Any, drawn: Any, name: str) -> Any:
    """Free units per (worker, type, unit) that the rows of ``held`` (a row counts 1, a
    pool its size) and ``drawn`` (its amount) take or give back: the subquery that moves
    ``inventory_counts.free`` in one UPDATE, for booking and for release alike. Both
    sources carry worker_id, type, unit, and size or amount."""
    units = union_all(
        select(
            held.c.worker_id,
            held.c.type,
            func.coalesce(held.c.unit, _EMPTY).label("unit"),
            case((held.c.unit.is_(None), _ONE), else_=held.c.size).label("n"),
        ),
        select(
            drawn.c.worker_id,
            drawn.c.type,
            func.coalesce(drawn.c.unit, _EMPTY),
            drawn.c.amount,
        ),
    ).subquery(name)
    return (
        select(units.c.worker_id, units.c.type, units.c.unit, func.sum(units.c.n).label("n"))
        .group_by(units.c.worker_id, units.c.type, units.c.unit)
        .subquery("per_key")
    )


def move_counters(
    per_key: Any, changed: Any, move: Callable[[Any, Any], Any], *, seek: Any = None
) -> tuple[Any, Any]:
    """The two counter UPDATEs that end a booking (``move`` is ``operator.sub``) and its
    release (``operator.add``), so that the two move the counters the same way:
    ``inventory_counts.free`` by ``per_key`` (units_per_count_row), and
    ``worker_inventories.untouched`` by the rows of ``changed`` per worker (a subquery with
    ``worker_id``: one row per vertex that stopped, or started again, being untouched).
    ``seek``, an array of worker ids, narrows the second UPDATE to them, redundantly."""
    counts_table: Any = alias(INVENTORY_COUNTS, "ic")
    counts = counts_table.c
    move_free = (
        update(counts_table)
        .where(
            counts.worker_id == per_key.c.worker_id,
            counts.type == per_key.c.type,
            counts.unit == per_key.c.unit,
        )
        .values(free=move(counts.free, per_key.c.n))
    )
    per_worker = (
        select(changed.c.worker_id, func.count().label("n"))
        .group_by(changed.c.worker_id)
        .subquery("per_worker")
    )
    inventories_table: Any = alias(WORKER_INVENTORIES, "wi")
    inventories = inventories_table.c
    conditions = [inventories.worker_id == per_worker.c.worker_id]
    if seek is not None:
        conditions.append(inventories.worker_id == any_(seek))
    move_untouched = (
        update(inventories_table)
        .where(*conditions)
        .values(untouched=move(inventories.untouched, per_worker.c.n))
    )
    return move_free, move_untouched


def _start() -> tuple[Any, Any, Any]:
    """The job's start, first thing in the statement: the CTE ``lk`` locks the workers
    ``l_workers`` in id order (as scheduling._LOCK_WORKERS_AND_JOB does in a round trip
    of its own), then starts the job if it is still waiting, its UPDATE locking its row.
    It returns one row, or none when the job stopped waiting. Returned with it: the
    condition every other write carries (that row exists: nothing written without it)
    and the time every write records (the job's ``started_at``), taken once the workers
    are locked."""
    workers = (
        select(WORKERS.c.id)
        .where(WORKERS.c.id == any_(_ints("l_workers")))
        .order_by(WORKERS.c.id)
        .with_for_update()
        .subquery("lw")
    )
    start = (
        update(JOBS)
        .where(
            JOBS.c.id == _JOB,
            # Re-checked on the latest version of the row if its lock had to wait.
            JOBS.c.state == WAITING,
            # Uncorrelated: evaluated once (a one-time filter), before the job's row is
            # read and locked.
            select(func.count()).select_from(workers).scalar_subquery() >= _ZERO,
        )
        .values(
            state=JobState.RUNNING,
            worker_id=bindparam("p_worker_id", type_=Integer),
            # In the UPDATE's projection, computed after the one-time filter has locked
            # the workers (and again if the job's lock waited on a change to its row).
            started_at=func.greatest(_NOW, func.clock_timestamp()),
        )
        .returning(JOBS.c.started_at.label("at"))
        .cte("lk")
    )
    # Uncorrelated too: each write checks it once, before it reads its first row. The
    # CTE runs once, so the statement records one time.
    return start, exists(select(start.c.at)), start.c.at


def _book_and_start() -> Any:
    """The one PostgreSQL statement that books a placement and starts the job: the start
    lock, the room, the allocation, the exclusive holds, shared holds and draws, the free
    counts and the job's event as data-modifying CTEs (see the module docstring). Long
    because it is one statement: each CTE refers to the ones before it, and split into
    helpers the reader would have to reassemble the SQL from several places."""
    lock, waiting, at = _start()
    room = book_room_statement(bindparam("p_slots", type_=Integer)).where(waiting).cte("room")
    allocation = insert(ALLOCATIONS).from_select(
        ["job_id", "queue_instance_id", "slots", "allocated_at"],
        select(_JOB, room.c.id, bindparam("p_slots", type_=Integer), at).select_from(
            room.join(lock, true())
        ),
    )

    runs = (
        func.unnest(_ints("h_worker"), _ints("h_first"), _ints("h_last"))
        .table_valued("w", "f", "l")
        .render_derived(name="r")
    )
    hv = _HV.c
    held = (
        update(_HV)
        .where(
            hv.worker_id == runs.c.w,
            hv.position.between(runs.c.f, runs.c.l),
            hv.held_by.is_(None),
            hv.shared == _ZERO,
            hv.used == _ZERO,
            waiting,
        )
        .values(held_by=_JOB)
        .returning(hv.worker_id, hv.type, hv.unit, hv.size)
        .cte("held")
    )
    sv = _SV.c
    shared = (
        update(_SV)
        .where(sv.id == any_(_ints("s_ids")), sv.held_by.is_(None), waiting)
        .values(shared=sv.shared + _ONE)
        .returning(sv.worker_id, sv.shared, sv.used)
        .cte("shared")
    )
    draws = func.unnest(_ints("d_ids"), _ints("d_amounts")).table_valued("id", "amount")
    draws = draws.render_derived(name="d")
    dv = _DV.c
    drawn = (
        update(_DV)
        .where(
            dv.id == draws.c.id,
            dv.held_by.is_(None),
            dv.used + draws.c.amount <= dv.size,
            waiting,
        )
        .values(used=dv.used + draws.c.amount)
        .returning(dv.worker_id, dv.type, dv.unit, dv.shared, dv.used, draws.c.amount)
        .cte("drawn")
    )
    rows = (
        func.unnest(
            _ints("b_vertex"),
            _ints("b_worker"),
            bindparam("b_mode", type_=ARRAY(String)),
            _ints("b_amount"),
        )
        .table_valued("vertex", "worker", "mode", "amount")
        .render_derived(name="b")
    )
    # The rows each vertex UPDATE changed, counted once for the check below and the
    # statement's answer.
    changed = select(
        select(func.count()).select_from(held).scalar_subquery().label("h"),
        select(func.count()).select_from(shared).scalar_subquery().label("s"),
        select(func.count()).select_from(drawn).scalar_subquery().label("d"),
    ).cte("n")
    # Only when every vertex was booked: a vertex held by another job has an active
    # exclusive booking, and a row of ours would break its unique index (an
    # IntegrityError instead of the conflict to report).
    bookings = insert(INVENTORY_BOOKINGS).from_select(
        ["job_id", "vertex_id", "worker_id", "mode", "amount", "booked_at"],
        select(_JOB, rows.c.vertex, rows.c.worker, rows.c.mode, rows.c.amount, at)
        .select_from(rows.join(lock, true()).join(changed, true()))
        .where(
            changed.c.h == bindparam("n_held", type_=Integer),
            changed.c.s == bindparam("n_shared", type_=Integer),
            changed.c.d == bindparam("n_drawn", type_=Integer),
        ),
    )

    per_key = units_per_count_row(held, drawn, "taken")
    # Vertices that were untouched and are not any more: every row held (it was entirely
    # free), a vertex shared for the first time, a pool drawn for the first time.
    one = _ONE
    spoiled = union_all(
        select(held.c.worker_id, one.label("n")),
        select(shared.c.worker_id, one).where(shared.c.shared == _ONE, shared.c.used == _ZERO),
        select(drawn.c.worker_id, one).where(
            drawn.c.used == drawn.c.amount, drawn.c.shared == _ZERO
        ),
    ).subquery("spoiled")
    # seek: redundant for the result (the spoiled rows are of these workers only), but it
    # gives the planner an index access: under the generic plan it hashed per_worker and
    # scanned every worker's inventory row (0.4-0.6 ms of a 1.3 ms booking at 4,096
    # nodes, auto_explain).
    move_free, move_untouched = move_counters(
        per_key, spoiled, operator.sub, seek=_ints("p_workers")
    )
    return select(
        select(room.c.id).scalar_subquery().label("room"),
        changed.c.h.label("held"),
        changed.c.s.label("shared"),
        changed.c.d.label("drawn"),
        select(at).scalar_subquery().label("at"),
    ).add_cte(
        allocation.cte("allocation"),
        bookings.cte("bookings"),
        move_free.cte("move_free"),
        move_untouched.cte("move_untouched"),
    )


_BOOK_AND_START = _book_and_start()


def disjoint(plan: BookingPlan) -> bool:
    """Whether no row is changed twice: no shared vertex or pool lies in an exclusive run
    (Placement.bookings never gives one; checked, as the statement would silently
    change such a row once)."""
    runs: dict[int, list[tuple[int, int]]] = {}
    for worker_id, first, last in plan.runs():
        runs.setdefault(worker_id, []).append((first, last))
    singles = [*plan.shared, *(vertex_id for vertex_id, _, _ in plan.draws)]
    if len(set(plan.shared)) != len(plan.shared):
        return False
    for vertex_id in singles:
        worker_id, position, _ = plan.places[vertex_id]
        if any(first <= position <= last for first, last in runs.get(worker_id, ())):
            return False
    return not set(plan.shared) & {vertex_id for vertex_id, _, _ in plan.draws}


@dataclass(frozen=True)
class Started:
    """What the one-statement start did: the time it recorded (the job's ``started_at``;
    None: the job was not waiting once locked, and nothing was written), whether the
    leader had a room, whether every vertex was booked. Unless there is a time and both
    are true, the caller must raise, which rolls back what the statement did."""

    at: datetime | None
    room: bool
    booked: bool


def book_and_start(
    session: Session, job: Job, plan: BookingPlan, leader: int, lock: list[int], now: datetime
) -> Started:
    """Lock the workers ``lock`` (with the plan's) and the job, take a room for the job's
    slots on the leader, book the plan and start the job, in one statement."""
    runs = plan.runs()
    pools: dict[int, int] = {}
    for vertex_id, _, amount in plan.draws:
        pools[vertex_id] = pools.get(vertex_id, 0) + amount
    n_held = sum(last - first + 1 for _, first, last in runs)
    row = (
        session.connection()
        .execute(
            _BOOK_AND_START,
            {
                "p_job_id": job.id,
                "p_worker_id": leader,
                "p_slots": job.slots,
                "p_now": now,
                "h_worker": [w for w, _, _ in runs],
                "h_first": [f for _, f, _ in runs],
                "h_last": [last for _, _, last in runs],
                "s_ids": plan.shared,
                "d_ids": list(pools),
                "d_amounts": list(pools.values()),
                "b_vertex": [r["vertex_id"] for r in plan.rows],
                "b_worker": [r["worker_id"] for r in plan.rows],
                "b_mode": [r["mode"] for r in plan.rows],
                "b_amount": [r["amount"] for r in plan.rows],
                "n_held": n_held,
                "n_shared": len(plan.shared),
                "n_drawn": len(pools),
                # Every worker the plan books on (sorted), for move_untouched's index.
                "p_workers": plan.workers,
                "l_workers": sorted({*lock, *plan.workers, leader}),
            },
        )
        .one()
    )
    booked = row.held == n_held and row.shared == len(plan.shared) and row.drawn == len(pools)
    # In UTC, as utcnow() gives (the server returns the session's time zone).
    at = None if row.at is None else row.at.astimezone(UTC)
    return Started(at, row.room is not None, booked)
