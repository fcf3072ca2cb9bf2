"""A scheduling run: dispatch the waiting jobs in priority, then age order, each seeing the
bookings of the ones before (research/sge.md sections e and g).

The run locks every worker first (the lock order of app/matching/dispatch.py), so pulls
wait for it rather than deadlock with it. It loads the cluster once; per category it asks
SQL once for the workers the misfit cache keeps, and keeps a per-run memo as Grid Engine
does: a category that could not place a job is *rejected* for the rest of the run (within
a run resources only shrink, so a later job of it cannot fit either), and queue instances
that failed a sequential category without soft requests are skipped for its later jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Category, Job, JobState, Worker, WorkerState
from app.matching.complex_dispatch import (
    ClusterState,
    Decision,
    QueueSlot,
    dispatch_on,
    load_state,
)
from app.matching.complex_table import load_table
from app.matching.misfits import fits


@dataclass
class _CategoryMemo:
    category: Category
    order: list[QueueSlot]
    rejected: bool = False
    sql_excluded: set[int] = field(default_factory=set)


@dataclass
class ScheduleReport:
    """Jobs considered and dispatched, and each dispatched job's decision."""

    considered: int = 0
    dispatched: int = 0
    rejected_categories: int = 0
    #: (job id, decision, dispatched) for every job considered, in order.
    decisions: list[tuple[int, Decision, bool]] = field(default_factory=list)
    #: Per traced job, the workers the SQL misfit cache ruled out.
    sql_excluded: dict[int, set[int]] = field(default_factory=dict)


def _memo(session: Session, state: ClusterState, category: Category, trace: bool) -> _CategoryMemo:
    active = Worker.state == WorkerState.ACTIVE
    kept = set(
        session.scalars(
            select(Worker.id).where(active, fits(category.id, Worker.id, Worker.generation))
        )
    )
    if not trace:
        return _CategoryMemo(category, state.queue_order(kept))
    # Tracing evaluates every active worker's instances, so that each gets its reason;
    # the workers SQL ruled out are remembered to check the two agree.
    everyone = set(session.scalars(select(Worker.id).where(active)))
    return _CategoryMemo(category, state.queue_order(everyone), sql_excluded=everyone - kept)


def schedule(session: Session, *, trace: bool = False) -> ScheduleReport:
    """Dispatch what can run now. ``trace`` keeps every evaluated queue instance's fit in
    the decisions (for scenarios and explanations), otherwise evaluation stops at the
    first fitting instance where that decides."""
    session.scalars(select(Worker.id).order_by(Worker.id).with_for_update()).all()
    state = load_state(session, load_table(session))
    jobs = session.execute(
        select(Job.id, Job.category_id)
        .where(Job.state == JobState.WAITING)
        .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
    ).all()
    memos: dict[int, _CategoryMemo] = {}
    report = ScheduleReport()
    for job_id, category_id in jobs:
        memo = memos.get(category_id)
        if memo is None:
            category = session.get(Category, category_id)
            assert category is not None
            memo = memos[category_id] = _memo(session, state, category, trace)
        if memo.rejected:
            continue
        report.considered += 1
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.state is not JobState.WAITING:
            continue
        decision, booked = dispatch_on(session, state, job, memo.category, memo.order, trace=trace)
        if trace:
            report.decisions.append((job.id, decision, booked))
            report.sql_excluded[job.id] = memo.sql_excluded
        if not booked:
            memo.rejected = True
            report.rejected_categories += 1
            continue
        if not trace:
            _skip_failed(memo, decision)
        job.state = JobState.RUNNING
        job.started_at = utcnow()
        report.dispatched += 1
    session.flush()
    return report


def _skip_failed(memo: _CategoryMemo, decision: Decision) -> None:
    """Instances before the first fit failed this category; they stay failed this run."""
    category = memo.category
    if category.pe is not None or category.soft != "NONE":
        return
    failed = 0
    for _slot, fit in decision.fits:
        if fit.fits:
            break
        failed += 1
    if failed:
        del memo.order[:failed]
