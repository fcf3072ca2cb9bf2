"""The bookkeeping invariants jobmatch promises, checked in SQL.

Every state change commits together with its bookings, so these hold after any crash;
`jobmatch db check` and the crash and concurrency tests run them.
"""

from __future__ import annotations

from sqlalchemy import ScalarSelect, and_, func, or_, select
from sqlalchemy.orm import Session, aliased

from app.db.models import (
    Allocation,
    ConsumableUsage,
    Job,
    JobBooking,
    JobState,
    ParallelEnvironment,
    QueueInstance,
)
from app.matching.allocation.invariants import inventory_violations
from app.matching.gridengine.quotas import quota_violations
from app.matching.held_bookings import ended_jobs_holding
from app.words import plural

#: Consumable amounts are floats (memory in bytes, fractional licences): sums of bookings
#: may differ from the running total in the last bits without anything being wrong.
TOLERANCE = 1e-6


def violations(session: Session) -> list[str]:
    """Every broken invariant, in words; empty when the books are straight."""
    problems: list[str] = []
    open_allocation = aliased(Allocation)

    # A running job has a worker and holds slots; any other job holds nothing.
    held = (
        select(func.count())
        .select_from(open_allocation)
        .where(open_allocation.job_id == Job.id, open_allocation.released_at.is_(None))
        .scalar_subquery()
    )
    for job_id, state, worker_id, open_count in session.execute(
        select(Job.id, Job.state, Job.worker_id, held).where(
            or_(
                and_(Job.state == JobState.RUNNING, or_(Job.worker_id.is_(None), held == 0)),
                and_(Job.state != JobState.RUNNING, held > 0),
            )
        )
    ):
        problems.append(
            f"job {job_id} is {state.value} on worker {worker_id} with {open_count} open "
            "allocations"
        )

    # A running job's slots equal its request.
    for job_id, slots, holding in session.execute(
        select(Job.id, Job.slots, func.sum(Allocation.slots))
        .join(Allocation, and_(Allocation.job_id == Job.id, Allocation.released_at.is_(None)))
        .where(Job.state == JobState.RUNNING)
        .group_by(Job.id, Job.slots)
        .having(func.sum(Allocation.slots) != Job.slots)
    ):
        problems.append(
            f"running job {job_id} asked for {plural(slots, 'slot')} but holds {holding}"
        )

    # Each queue instance's booking equals its open allocations and stays within capacity.
    for qi_id, slots, used, allocated in session.execute(
        select(
            QueueInstance.id,
            QueueInstance.slots,
            QueueInstance.used_slots,
            select(func.coalesce(func.sum(Allocation.slots), 0))
            .where(
                Allocation.queue_instance_id == QueueInstance.id,
                Allocation.released_at.is_(None),
            )
            .scalar_subquery(),
        )
    ):
        if used != allocated:
            problems.append(
                f"queue instance {qi_id} books {plural(used, 'slot')}, allocations hold {allocated}"
            )
        if not 0 <= used <= slots:
            problems.append(f"queue instance {qi_id} books {used} of {plural(slots, 'slot')}")
    problems += _consumable_violations(session)
    problems += _parallel_environment_violations(session)
    problems += quota_violations(session, TOLERANCE)
    problems += inventory_violations(session)
    return problems


def _consumable_violations(session: Session) -> list[str]:
    """Grid Engine consumables (app/matching/gridengine/decide.py): each usage row's
    ``used`` and ``used_nonexclusive`` equal the sums of the job bookings on it and stay
    within 0..capacity, and only running jobs hold bookings."""
    problems: list[str] = []

    def booked(nonexclusive: bool) -> ScalarSelect[float]:
        return (
            select(func.coalesce(func.sum(JobBooking.amount), 0.0))
            .where(
                JobBooking.usage_id == ConsumableUsage.id,
                JobBooking.nonexclusive.is_(nonexclusive),
            )
            .scalar_subquery()
        )

    for usage_id, level, capacity, used, nonexclusive, held, held_nonexclusive in session.execute(
        select(
            ConsumableUsage.id,
            ConsumableUsage.level,
            ConsumableUsage.capacity,
            ConsumableUsage.used,
            ConsumableUsage.used_nonexclusive,
            booked(False),
            booked(True),
        )
    ):
        where = f"consumable usage {usage_id} ({level})"
        if abs(used - held) > TOLERANCE or abs(nonexclusive - held_nonexclusive) > TOLERANCE:
            problems.append(
                f"{where} books {used:g} (+{nonexclusive:g} non-exclusive), running jobs "
                f"hold {held:g} (+{held_nonexclusive:g})"
            )
        if not -TOLERANCE <= used <= capacity + TOLERANCE or nonexclusive < -TOLERANCE:
            problems.append(f"{where} books {used:g} of {capacity:g}")
    problems += ended_jobs_holding(session, JobBooking.__table__, "consumable booking")
    return problems


def _parallel_environment_violations(session: Session) -> list[str]:
    """A parallel environment never lends more slots than it has."""
    problems: list[str] = []
    for name, slots, in_use in session.execute(
        select(
            ParallelEnvironment.name,
            ParallelEnvironment.slots,
            select(func.coalesce(func.sum(Allocation.slots), 0))
            .join(Job, Job.id == Allocation.job_id)
            .where(Job.pe == ParallelEnvironment.name, Allocation.released_at.is_(None))
            .scalar_subquery(),
        )
    ):
        if in_use > slots:
            problems.append(
                f"parallel environment {name} lends {in_use} of {plural(slots, 'slot')}"
            )
    return problems
