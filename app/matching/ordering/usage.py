"""Fair share's books (docs/ordering.md): each submitter's row of submitter_shares, made
when it submits while fair share is on, and its usage booked when one of its jobs stops
running (it finished or failed, was given back, lost its lease or was cancelled).

A job's usage is its slots (its vertices, when it held vertices of an inventory) times
the seconds it ran. The row is locked for the booking, so concurrent ends of one
submitter's jobs add up; the decay is computed from the row's stored instant
(app/matching/ordering/decay.py), never by rewriting rows on a timer.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import InventoryBooking, Job, JobState, SubmitterGroup, SubmitterShare
from app.matching.ordering.decay import booked, usage_log2
from app.matching.ordering.policy import active


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def ensure_rows(session: Session, submitters: Iterable[str]) -> None:
    """A share row (weight 1, no usage) for each submitter that has none: the fair-share
    pull reads the heads of the submitters with rows (app/matching/dispatch/pull_heads.py).
    Concurrent submissions may make the same row: the primary key lets one insert win."""
    names = sorted(set(submitters))
    if not names:
        return
    connection = session.connection()
    insert_into = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    now = utcnow()
    session.execute(
        insert_into(SubmitterShare).on_conflict_do_nothing(index_elements=["submitter"]),
        [{"submitter": name, "usage_at": now, "usage_epoch": now.timestamp()} for name in names],
    )


def rows_for_waiting_jobs(session: Session) -> None:
    """Rows for every submitter with waiting jobs: when fair share is turned on, the
    jobs submitted before have submitters without rows (the server does this at start)."""
    ensure_rows(
        session,
        session.scalars(select(Job.submitter).where(Job.state == JobState.WAITING).distinct()),
    )


def if_fair_share(session: Session, submitters: Iterable[str]) -> None:
    """:func:`ensure_rows` when the process's policy has fair share (a submission's part)."""
    if active().fair_share:
        ensure_rows(session, submitters)


def units_of(session: Session, job: Job) -> int:
    """What the job held while it ran: its vertices when it booked some of an inventory
    on this run, else its slots."""
    if job.jobspec is not None and job.started_at is not None:
        vertices = session.scalar(
            select(func.count())
            .select_from(InventoryBooking)
            .where(InventoryBooking.job_id == job.id, InventoryBooking.booked_at >= job.started_at)
        )
        if vertices:
            return int(vertices)
    return job.slots


def book_job(session: Session, job: Job, ended_at: datetime | None = None) -> None:
    """Book the usage of a job that stops running now (call before its ``started_at`` is
    cleared), when the process's policy has fair share."""
    ordering = active()
    if not ordering.fair_share or job.started_at is None:
        return
    end = _aware(ended_at or job.ended_at or utcnow())
    seconds = max(0.0, (end - _aware(job.started_at)).total_seconds())
    book(session, job.submitter, units_of(session, job) * seconds, end, ordering.halflife_seconds)


def book(
    session: Session, submitter: str, amount: float, at: datetime, halflife_seconds: float
) -> SubmitterShare:
    """Add ``amount`` slot-seconds used at ``at`` to the submitter's decayed usage, and to
    its group's when it has one (the submitter's row is locked first, then the group's,
    in every booking and every change of group)."""
    ensure_rows(session, [submitter])
    row = session.get(SubmitterShare, submitter, with_for_update=True, populate_existing=True)
    assert row is not None  # just made
    add_usage(row, amount, at.timestamp(), halflife_seconds)
    if row.group_name is not None:
        group = session.get(
            SubmitterGroup, row.group_name, with_for_update=True, populate_existing=True
        )
        assert group is not None  # the foreign key
        add_usage(group, amount, at.timestamp(), halflife_seconds)
    session.flush()
    return row


def add_usage(
    row: SubmitterShare | SubmitterGroup, amount: float, at_epoch: float, halflife_seconds: float
) -> None:
    """Book ``amount`` (negative: take it away, never below 0) onto a submitter's or a
    group's row, its log per weight kept in step."""
    usage, epoch = booked(row.usage, row.usage_epoch, amount, at_epoch, halflife_seconds)
    row.usage = max(0.0, usage)
    row.usage_epoch = epoch
    row.usage_at = datetime.fromtimestamp(epoch, UTC)
    row.usage_log2 = usage_log2(row.usage, row.weight)
