"""The inventory's bookkeeping invariants (issue 9), checked in SQL for
app.matching.invariants.violations.

The vertex rows carry copies of the active bookings, which the scheduler's filter reads
instead of the bookings: ``held_by`` (the job of the exclusive booking whose subtree holds
the row), ``shared`` and ``used``; and the workers carry copies of their rows:
the free counts (with each count's span) and the untouched counter. The booking and
release statements keep them in step; this module proves that they are. ``held_by`` has
no foreign key (migration 0014): this check is what vouches for it, and it says more
than a key would (the very job whose active booking covers the row, not any job).
"""

from __future__ import annotations

from sqlalchemy import and_, case, exists, func, or_, select
from sqlalchemy.orm import Session

from app.db.tables import (
    INVENTORY_BOOKINGS,
    INVENTORY_COUNTS,
    INVENTORY_VERTICES,
    WORKER_INVENTORIES,
)
from app.matching.allocation.inventory import counts_of_vertices
from app.matching.held_bookings import ended_jobs_holding

_ACTIVE = INVENTORY_BOOKINGS.c.released_at.is_(None)


def inventory_violations(session: Session) -> list[str]:
    """Every broken inventory invariant, in words; empty when the copies agree."""
    return [
        *_held_violations(session),
        *_shared_and_drawn_violations(session),
        *_count_violations(session),
        *_untouched_violations(session),
        *_ended_job_violations(session),
    ]


def _held_violations(session: Session) -> list[str]:
    """A row is held by job J exactly when an active exclusive booking of J covers it
    (its vertex's subtree, ``position .. last_position`` of the same worker)."""
    problems: list[str] = []
    row = INVENTORY_VERTICES.alias("held_row")
    root = INVENTORY_VERTICES.alias("booked_root")
    booking = INVENTORY_BOOKINGS
    covered = (
        exists()
        .where(
            booking.c.job_id == row.c.held_by,
            booking.c.mode == "exclusive",
            _ACTIVE,
            root.c.id == booking.c.vertex_id,
            root.c.worker_id == row.c.worker_id,
            row.c.position.between(root.c.position, root.c.last_position),
        )
        .correlate(row)
    )
    for vertex_id, worker_id, job_id in session.execute(
        select(row.c.id, row.c.worker_id, row.c.held_by).where(row.c.held_by.is_not(None), ~covered)
    ):
        problems.append(
            f"vertex {vertex_id} of worker {worker_id} is held by job {job_id}, "
            "which has no active exclusive booking over it"
        )
    inside = INVENTORY_VERTICES.alias("inside")
    for booking_id, job_id, vertex_id, position, held_by in session.execute(
        select(booking.c.id, booking.c.job_id, inside.c.id, inside.c.position, inside.c.held_by)
        .join(root, root.c.id == booking.c.vertex_id)
        .join(
            inside,
            and_(
                inside.c.worker_id == root.c.worker_id,
                inside.c.position.between(root.c.position, root.c.last_position),
            ),
        )
        .where(
            booking.c.mode == "exclusive",
            _ACTIVE,
            or_(inside.c.held_by.is_(None), inside.c.held_by != booking.c.job_id),
        )
    ):
        problems.append(
            f"exclusive booking {booking_id} of job {job_id} covers vertex {vertex_id} "
            f"(position {position}), which is held by "
            f"{'nobody' if held_by is None else f'job {held_by}'}"
        )
    return problems


def _shared_and_drawn_violations(session: Session) -> list[str]:
    """Each row's ``shared`` equals its active shared bookings and ``used`` the amounts
    its active draws took (the bookings summed per vertex once, then joined)."""
    booking = INVENTORY_BOOKINGS
    per_vertex = (
        select(
            booking.c.vertex_id,
            func.sum(case((booking.c.mode == "shared", 1), else_=0)).label("shared"),
            func.sum(case((booking.c.mode == "draw", booking.c.amount), else_=0)).label("used"),
        )
        .where(_ACTIVE, booking.c.mode.in_(("shared", "draw")))
        .group_by(booking.c.vertex_id)
        .subquery("per_vertex")
    )
    v = INVENTORY_VERTICES
    shared = func.coalesce(per_vertex.c.shared, 0)
    drawn = func.coalesce(per_vertex.c.used, 0)
    problems: list[str] = []
    for vertex_id, worker_id, stored_shared, booked_shared, used, booked_used in session.execute(
        select(v.c.id, v.c.worker_id, v.c.shared, shared, v.c.used, drawn)
        .outerjoin(per_vertex, per_vertex.c.vertex_id == v.c.id)
        .where(or_(v.c.shared != shared, v.c.used != drawn))
    ):
        problems.append(
            f"vertex {vertex_id} of worker {worker_id} is shared {stored_shared} times and "
            f"has {used} used; active bookings share it {booked_shared} times and draw "
            f"{booked_used}"
        )
    return problems


def _count_violations(session: Session) -> list[str]:
    """Each worker's free counts (total, free, span) equal the aggregates of its rows."""
    truth = {
        (worker_id, type_, unit_): (int(total), int(free), int(span))
        for worker_id, type_, unit_, total, free, span in session.execute(counts_of_vertices())
    }
    c = INVENTORY_COUNTS.c
    stored = {
        (worker_id, type_, unit_): (int(total), int(free), int(span))
        for worker_id, type_, unit_, total, free, span in session.execute(
            select(c.worker_id, c.type, c.unit, c.total, c.free, c.span)
        )
    }
    problems: list[str] = []
    for key in sorted(truth.keys() | stored.keys()):
        if truth.get(key) != stored.get(key):
            worker_id, type_, unit_ = key
            problems.append(
                f"worker {worker_id} counts {type_}{'/' + unit_ if unit_ else ''} as "
                f"(total, free, span) {stored.get(key)}; its vertices give {truth.get(key)}"
            )
    return problems


def _untouched_violations(session: Session) -> list[str]:
    """Each worker's untouched counter equals its rows that no job uses at all."""
    v = INVENTORY_VERTICES
    counters = WORKER_INVENTORIES
    untouched = (
        select(func.count())
        .where(
            v.c.worker_id == counters.c.worker_id,
            v.c.held_by.is_(None),
            v.c.shared == 0,
            v.c.used == 0,
        )
        .scalar_subquery()
    )
    return [
        f"worker {worker_id} counts {stored} untouched vertices; its rows give {actual}"
        for worker_id, stored, actual in session.execute(
            select(counters.c.worker_id, counters.c.untouched, untouched).where(
                counters.c.untouched != untouched
            )
        )
    ]


def _ended_job_violations(session: Session) -> list[str]:
    """Only running jobs have active inventory bookings."""
    return ended_jobs_holding(session, INVENTORY_BOOKINGS, "inventory booking", _ACTIVE)
