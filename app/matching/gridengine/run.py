"""A scheduling run: dispatch the waiting jobs in priority, then age order, each seeing the
bookings of the ones before (docs/notations/gridengine.md, levels and categories).

The run locks every worker first (the lock order of app/matching/dispatch/pull.py), so pulls
wait for it rather than deadlock with it. It loads the cluster once; per category it asks
SQL once for the workers the misfit cache keeps, and keeps a per-run memo as Grid Engine
does: a category that could not place a job is *rejected* for the rest of the run (within
a run resources only shrink, so a later job of it cannot fit either), and queue instances
that failed a sequential category without soft requests are skipped for its later jobs.
Since nothing else books while it holds the worker locks, its bookings live in memory
until the end of the run and are written in a few batched statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Category, Job, JobState, Worker, WorkerState
from app.matching import announce
from app.matching.allocation.vertex_requests import min_nodes
from app.matching.dispatch import task_limits
from app.matching.dispatch.pull import category_requests
from app.matching.dispatch.record import record_placements
from app.matching.gridengine.decide import Decision
from app.matching.gridengine.groups import load_groups
from app.matching.gridengine.quotas import load_quota_book, write_run_quotas
from app.matching.gridengine.run_bookings import RunBookings, book_in_run
from app.matching.gridengine.state import ClusterState, QueueSlot, load_state
from app.matching.gridengine.table import load_table
from app.matching.misfits import fits_category
from app.notations.gridengine.evaluator import FitCode


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
            select(Worker.id).where(active, fits_category(category, Worker.id, Worker.generation))
        )
    )
    if needs_several_nodes(category):
        # A job asking for N nodes (RFC 14) gets N distinct workers or waits; a Grid
        # Engine run books queue instances, not nodes, so it leaves these jobs to the
        # allocation path (POST /v1/jobs/{id}/allocate) instead of starting them on one.
        return _CategoryMemo(category, [], rejected=True)
    if not trace:
        return _CategoryMemo(category, state.queue_order(kept))
    # Tracing evaluates every active worker's instances, so that each gets its reason;
    # the workers SQL ruled out are remembered to check the two agree.
    everyone = set(session.scalars(select(Worker.id).where(active)))
    return _CategoryMemo(category, state.queue_order(everyone), sql_excluded=everyone - kept)


#: Waiting jobs locked per statement as the run reaches them.
LOCK_CHUNK = 1000


def schedule(session: Session, *, trace: bool = False) -> ScheduleReport:
    """Dispatch what can run now. ``trace`` keeps every evaluated queue instance's fit in
    the decisions (for scenarios and explanations), otherwise evaluation stops at the
    first fitting instance where that decides. Bookings are kept in memory and written
    at the end (app/matching/gridengine/run_bookings.py)."""
    session.scalars(select(Worker.id).order_by(Worker.id).with_for_update()).all()
    state = load_state(session, load_table(session))
    # Once per run: a job's -q list or a quota filter may name a group.
    state.groups = load_groups(session)
    quota_book = load_quota_book(session)
    jobs = session.execute(
        select(Job.id, Job.category_id, Job.submitter, Job.project, Job.array_id)
        .where(Job.state == JobState.WAITING)
        .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
    ).all()
    # qsub -tc: how many more tasks each limited array may start (read after every
    # worker's lock, so no pull starts one meanwhile).
    array_room = task_limits.room_of_arrays(session, {row.array_id for row in jobs})
    categories = _categories(session, {row.category_id for row in jobs})
    memos: dict[int, _CategoryMemo] = {}
    report = ScheduleReport()
    run = RunBookings()
    lookup = run.pe_lookup(session)
    now = utcnow()
    locked: set[int] = set()
    locked_until = 0
    #: (category, user, project) a resource quota stopped this run: Grid Engine adds the
    #: owner and the project to the category when quotas name them, so other users' (and
    #: other projects') jobs go on.
    quota_stopped: set[tuple[int, str, str | None]] = set()
    for index, (job_id, category_id, user, project, array_id) in enumerate(jobs):
        if array_room.get(array_id, 1) <= 0:
            continue  # its array runs as many tasks as it may
        memo = memos.get(category_id)
        if memo is None:
            memo = memos[category_id] = _memo(session, state, categories[category_id], trace)
            if memo.rejected:
                report.rejected_categories += 1
        if memo.rejected or (category_id, user, project) in quota_stopped:
            continue
        report.considered += 1
        if index >= locked_until:
            locked_until = index + LOCK_CHUNK
            locked |= _lock_waiting(session, jobs[index:locked_until], memos)
        if job_id not in locked:
            continue  # cancelled (or taken) since the list was read
        decision, booked = book_in_run(
            state,
            run,
            lookup,
            job_id,
            memo.category,
            memo.order,
            now,
            trace=trace,
            quota_book=quota_book,
            user=user,
            project=project,
        )
        if trace:
            report.decisions.append((job_id, decision, booked))
            report.sql_excluded[job_id] = memo.sql_excluded
        if not booked and stopped_by_quota(decision):
            quota_stopped.add((category_id, user, project))
            continue
        if not booked:
            memo.rejected = True
            report.rejected_categories += 1
            continue
        if not trace:
            _skip_failed(memo, decision)
        if array_id in array_room:
            array_room[array_id] -= 1
        report.dispatched += 1
    run.write(session)
    write_run_quotas(session, quota_book)
    # Each start is a dispatch its worker receives on its next pull (issue 22).
    record_placements(session, run.started_jobs(), now)
    announce.rooms_changed(session, {cast(int, row["new_worker"]) for row in run.started})
    return report


def stopped_by_quota(decision: Decision) -> bool:
    """Whether a resource quota, not the cluster, kept the job from every instance."""
    if decision.quota_refusal is not None:
        return True
    return any(fit.code is FitCode.QUOTA_EXCEEDED for _slot, fit in decision.fits)


def needs_several_nodes(category: Category) -> bool:
    """The category's jobspec asks for more than one node (RFC 14 ``node`` vertices)."""
    return category.jobspec is not None and min_nodes(category_requests(category.jobspec)) > 1


def _categories(session: Session, ids: set[int]) -> dict[int, Category]:
    """The categories of the waiting jobs, a chunk per statement (one get per category
    cost a round trip each: a thousand in a full-size run)."""
    wanted = sorted(ids)
    found: dict[int, Category] = {}
    for start in range(0, len(wanted), LOCK_CHUNK):
        chunk = wanted[start : start + LOCK_CHUNK]
        found.update(
            (category.id, category)
            for category in session.scalars(select(Category).where(Category.id.in_(chunk)))
        )
    return found


def _lock_waiting(
    session: Session,
    upcoming: Sequence[Row[int, int, str, str | None, int | None]],
    memos: dict[int, _CategoryMemo],
) -> set[int]:
    """Lock the upcoming jobs of categories not rejected yet; the ids still waiting."""
    wanted = [
        job_id
        for job_id, category_id, *_rest in upcoming
        if category_id not in memos or not memos[category_id].rejected
    ]
    if not wanted:
        return set()
    return set(
        session.scalars(
            select(Job.id)
            .where(Job.id.in_(wanted), Job.state == JobState.WAITING)
            .order_by(Job.id)
            .with_for_update()
        )
    )


def _skip_failed(memo: _CategoryMemo, decision: Decision) -> None:
    """Instances before the first fit failed this category; they stay failed this run."""
    category = memo.category
    if category.pe is not None or category.soft != "NONE":
        return
    failed = 0
    for _slot, fit in decision.fits:
        # A quota's refusal is the user's, not the category's: later jobs may be others'.
        if fit.fits or fit.code is FitCode.QUOTA_EXCEEDED:
            break
        failed += 1
    if failed:
        del memo.order[:failed]
