"""Booking and releasing what a placement selected, vertex by vertex.

Booking is a conditional UPDATE per vertex set (``held_by IS NULL AND shared = 0 AND used =
0`` for an exclusive subtree), so two transactions can never both book one vertex: the
loser's UPDATE matches fewer rows and it raises instead of overlapping. The free counts
and untouched-node counts of the coarse filter move with every booking and release."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    bindparam,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import (
    InventoryVertex,
    Job,
)
from app.db.tables import (
    INVENTORY_BOOKINGS,
    INVENTORY_COUNTS,
    INVENTORY_VERTICES,
    WORKER_INVENTORIES,
)
from app.matching.allocation.placement import Placement
from app.matching.allocation.vertices import Vertex
from app.matching.errors import ConflictError


def _places(session: Session, vertices: Sequence[Vertex]) -> dict[int, tuple[int, int, int]]:
    """Worker, position and last position of each vertex: where the tree recorded it, and
    one query for the vertices it did not (trees not built from rows)."""
    places = {v.key: v.place for v in vertices if v.place is not None}
    unique = sorted({v.key for v in vertices if v.place is None})
    for chunk in range(0, len(unique), 500):
        for vertex_id, worker_id, first, last in session.execute(
            select(
                InventoryVertex.id,
                InventoryVertex.worker_id,
                InventoryVertex.position,
                InventoryVertex.last_position,
            ).where(InventoryVertex.id.in_(unique[chunk : chunk + 500]))
        ):
            places[vertex_id] = (worker_id, first, last)
    return places


def _runs(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent position ranges merged (the cores of one socket are one run)."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and merged[-1][1] + 1 == first:
            merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged


#: Changes of free units per (worker, type, unit) and of untouched vertices per worker.
_FreeDelta = dict[tuple[int, str, str], int]


_UntouchedDelta = dict[int, int]


def _units(unit: str | None, size: int) -> int:
    """Free units one entirely free vertex counts for: 1, or the size of a pool."""
    return 1 if unit is None else size


def _conflict(job: Job) -> ConflictError:
    return ConflictError(f"job {job.id}: resources were taken by another job; retry")


_v = INVENTORY_VERTICES.c


#: Shared holds on vertices not held exclusively; the rows changed.
_SHARE = (
    update(INVENTORY_VERTICES)
    .where(_v.id.in_(bindparam("vertex_ids", expanding=True)), _v.held_by.is_(None))
    .values(shared=_v.shared + 1)
    .returning(_v.id, _v.shared, _v.used)
)


#: An amount drawn from a pool that has it.
_DRAW = (
    update(INVENTORY_VERTICES)
    .where(
        _v.id == bindparam("vertex_id"),
        _v.held_by.is_(None),
        _v.used + bindparam("amount") <= _v.size,
    )
    .values(used=_v.used + bindparam("amount"))
    .returning(_v.type, _v.unit, _v.shared, _v.used)
)


#: An exclusive hold on a run of positions of one worker, every row entirely free.
_HOLD = (
    update(INVENTORY_VERTICES)
    .where(
        _v.worker_id == bindparam("b_worker"),
        _v.position.between(bindparam("first"), bindparam("last")),
        _v.held_by.is_(None),
        _v.shared == 0,
        _v.used == 0,
    )
    .values(held_by=bindparam("job_id"))
    .returning(_v.type, _v.unit, _v.size)
)


_ADD_BOOKINGS = insert(INVENTORY_BOOKINGS)


@dataclass(frozen=True)
class BookingPlan:
    """What booking a placement writes, worked out in Python before any statement: the
    exclusive runs of positions per worker, the vertices held shared, the draws (vertex,
    worker, amount, in booking order) and the booking rows."""

    exclusive: dict[int, list[tuple[int, int]]]
    shared: list[int]
    draws: list[tuple[int, int, int]]
    rows: list[dict[str, Any]]
    places: dict[int, tuple[int, int, int]]
    workers: list[int]

    def runs(self) -> list[tuple[int, int, int]]:
        """(worker, first, last) of each exclusive run, in worker and position order."""
        return [
            (worker_id, first, last)
            for worker_id, ranges in sorted(self.exclusive.items())
            for first, last in _runs(ranges)
        ]


def plan_bookings(session: Session, job: Job, placement: Placement) -> BookingPlan:
    """The rows and ranges that booking the placement for the job writes."""
    session.flush()
    bookings = placement.bookings()
    places = _places(session, [b.vertex for b in bookings])
    exclusive: dict[int, list[tuple[int, int]]] = {}
    shared: list[int] = []
    draws: list[tuple[int, int, int]] = []
    rows = []
    for booking in bookings:
        worker_id, first, last = places[booking.vertex.key]
        if booking.mode == "exclusive":
            exclusive.setdefault(worker_id, []).append((first, last))
        elif booking.mode == "shared":
            shared.append(booking.vertex.key)
        else:
            draws.append((booking.vertex.key, worker_id, booking.amount))
        rows.append(
            {
                "job_id": job.id,
                "vertex_id": booking.vertex.key,
                "worker_id": worker_id,
                "mode": booking.mode,
                "amount": booking.amount,
            }
        )
    workers = sorted({places[b.vertex.key][0] for b in bookings})
    return BookingPlan(exclusive, shared, draws, rows, places, workers)


def book_placement(session: Session, job: Job, placement: Placement) -> list[int]:
    """Book what the placement selected for the job; the worker ids touched. Raises
    ConflictError (and the transaction must roll back) when a vertex was taken meanwhile.

    Shared holds are one conditional UPDATE, which must change every vertex; exclusive
    subtrees one conditional UPDATE per run of merged position ranges (per worker), which
    must change every row of the run, or some row was taken. The UPDATEs return the rows
    they changed, and the free counts and untouched counters move by what those rows held
    (no recount). The positions come from the tree the placement was made on.
    (booking_statements.book_and_start does the same in one statement on PostgreSQL.)"""
    plan = plan_bookings(session, job, placement)
    book_plan(session, job, plan)
    return plan.workers


def book_plan(session: Session, job: Job, plan: BookingPlan) -> None:
    """:func:`book_placement` of a plan already worked out."""
    connection = session.connection()
    free: _FreeDelta = {}
    untouched: _UntouchedDelta = {}
    for vertex_id, worker_id, amount in plan.draws:
        drawn = connection.execute(_DRAW, {"vertex_id": vertex_id, "amount": amount}).one_or_none()
        if drawn is None:
            raise _conflict(job)
        key = (worker_id, drawn.type, drawn.unit or "")
        free[key] = free.get(key, 0) - amount
        if drawn.used == amount and drawn.shared == 0:
            untouched[worker_id] = untouched.get(worker_id, 0) - 1
    if plan.shared:
        # bookings() gives each shared vertex once.
        changed = connection.execute(_SHARE, {"vertex_ids": plan.shared}).all()
        if len(changed) != len(plan.shared):
            raise _conflict(job)
        for row in changed:
            if row.shared == 1 and row.used == 0:
                worker_id = plan.places[row.id][0]
                untouched[worker_id] = untouched.get(worker_id, 0) - 1
    for worker_id, first, last in plan.runs():
        held = connection.execute(
            _HOLD, {"b_worker": worker_id, "first": first, "last": last, "job_id": job.id}
        ).all()
        if len(held) != last - first + 1:
            raise _conflict(job)
        # Every row held was entirely free (shared = 0, used = 0, not held).
        for row in held:
            key = (worker_id, row.type, row.unit or "")
            free[key] = free.get(key, 0) - _units(row.unit, row.size)
        untouched[worker_id] = untouched.get(worker_id, 0) - len(held)
    if plan.rows:
        connection.execute(_ADD_BOOKINGS, plan.rows)
    _apply(session, free, untouched)


def conflict(job: Job) -> ConflictError:
    """The error of a booking that found a vertex taken (the transaction rolls back)."""
    return _conflict(job)


_MOVE_FREE = (
    update(INVENTORY_COUNTS)
    .where(
        INVENTORY_COUNTS.c.worker_id == bindparam("w_id"),
        INVENTORY_COUNTS.c.type == bindparam("w_type"),
        INVENTORY_COUNTS.c.unit == bindparam("w_unit"),
    )
    .values(free=INVENTORY_COUNTS.c.free + bindparam("delta"))
)


_MOVE_UNTOUCHED = (
    update(WORKER_INVENTORIES)
    .where(WORKER_INVENTORIES.c.worker_id == bindparam("w_id"))
    .values(untouched=WORKER_INVENTORIES.c.untouched + bindparam("delta"))
)


def _apply(session: Session, free: _FreeDelta, untouched: _UntouchedDelta) -> None:
    """Move the free counts and untouched counters by the deltas (one executemany each,
    in key order so that concurrent transactions lock rows in the same order)."""
    changes = [
        {"w_id": w, "w_type": t, "w_unit": u, "delta": d}
        for (w, t, u), d in sorted(free.items())
        if d
    ]
    connection = session.connection()
    if changes:
        connection.execute(_MOVE_FREE, changes)
    moved = [{"w_id": w, "delta": d} for w, d in sorted(untouched.items()) if d]
    if moved:
        connection.execute(_MOVE_UNTOUCHED, moved)


_ACTIVE_BOOKINGS = (
    select(
        INVENTORY_BOOKINGS.c.id,
        INVENTORY_BOOKINGS.c.vertex_id,
        INVENTORY_BOOKINGS.c.worker_id,
        INVENTORY_BOOKINGS.c.mode,
        INVENTORY_BOOKINGS.c.amount,
    )
    .where(
        INVENTORY_BOOKINGS.c.job_id == bindparam("job_id"),
        INVENTORY_BOOKINGS.c.released_at.is_(None),
    )
    .order_by(INVENTORY_BOOKINGS.c.vertex_id)
    .with_for_update()
)


_UNHOLD = (
    update(INVENTORY_VERTICES)
    .where(
        _v.worker_id.in_(bindparam("worker_ids", expanding=True)),
        _v.held_by == bindparam("job_id"),
    )
    .values(held_by=None)
    .returning(_v.worker_id, _v.type, _v.unit, _v.size)
)


_UNSHARE = (
    update(INVENTORY_VERTICES)
    .where(_v.id == bindparam("vertex_id"))
    .values(shared=_v.shared - 1)
    .returning(_v.type, _v.unit, _v.shared, _v.used, _v.held_by)
)


_UNDRAW = (
    update(INVENTORY_VERTICES)
    .where(_v.id == bindparam("vertex_id"))
    .values(used=_v.used - bindparam("amount"))
    .returning(_v.type, _v.unit, _v.shared, _v.used, _v.held_by)
)


_END_BOOKINGS = (
    update(INVENTORY_BOOKINGS)
    .where(
        INVENTORY_BOOKINGS.c.job_id == bindparam("b_job"),
        INVENTORY_BOOKINGS.c.released_at.is_(None),
    )
    .values(released_at=bindparam("now"))
)


def release(session: Session, job: Job) -> None:
    """Free everything the job holds in inventories: its exclusive holds in one UPDATE,
    shared holds and draws one by one; the counts move by what the UPDATEs returned."""
    session.flush()
    connection = session.connection()
    bookings = connection.execute(_ACTIVE_BOOKINGS, {"job_id": job.id}).all()
    if not bookings:
        return
    free: _FreeDelta = {}
    untouched: _UntouchedDelta = {}
    touched = sorted({b.worker_id for b in bookings})
    if any(b.mode == "exclusive" for b in bookings):
        for row in connection.execute(_UNHOLD, {"worker_ids": touched, "job_id": job.id}):
            # A held row has shared = 0 and used = 0 (held_alone): it is entirely free now.
            key = (row.worker_id, row.type, row.unit or "")
            free[key] = free.get(key, 0) + _units(row.unit, row.size)
            untouched[row.worker_id] = untouched.get(row.worker_id, 0) + 1
    for b in bookings:
        if b.mode == "exclusive":
            continue
        if b.mode == "shared":
            after = connection.execute(_UNSHARE, {"vertex_id": b.vertex_id}).one()
        else:
            after = connection.execute(
                _UNDRAW, {"vertex_id": b.vertex_id, "amount": b.amount}
            ).one()
            key = (b.worker_id, after.type, after.unit or "")
            free[key] = free.get(key, 0) + b.amount
        if after.shared == 0 and after.used == 0 and after.held_by is None:
            untouched[b.worker_id] = untouched.get(b.worker_id, 0) + 1
    connection.execute(_END_BOOKINGS, {"b_job": job.id, "now": utcnow()})
    _apply(session, free, untouched)
