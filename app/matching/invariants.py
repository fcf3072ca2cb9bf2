"""The bookkeeping invariants jobmatch promises, checked in SQL.

Every state change commits together with its bookings, so these hold after any crash;
`jobmatch db check` and the crash and concurrency tests run them.
"""

from __future__ import annotations

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session, aliased

from app.db.models import Allocation, Job, JobState, QueueInstance


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
        problems.append(f"running job {job_id} asked for {slots} slots but holds {holding}")

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
                f"queue instance {qi_id} books {used} slots, allocations hold {allocated}"
            )
        if not 0 <= used <= slots:
            problems.append(f"queue instance {qi_id} books {used} of {slots} slots")
    return problems
