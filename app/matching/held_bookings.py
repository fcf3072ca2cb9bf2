"""The invariant every booking table keeps (consumable, quota and inventory bookings):
only a running job holds bookings. One statement for ``jobmatch db check`` to ask of
each table, so that the three checks say their findings the same way."""

from __future__ import annotations

from sqlalchemy import ColumnElement, FromClause, func, select
from sqlalchemy.orm import Session

from app.db.models import Job, JobState
from app.words import plural


def ended_jobs_holding(
    session: Session, bookings: FromClause, what: str, *conditions: ColumnElement[bool]
) -> list[str]:
    """In words, each job that is not running yet holds rows of ``bookings`` (a table with
    a ``job_id`` column; only the rows meeting ``conditions`` count), ``what`` naming one
    of them: ``job 7 is finished but holds 2 quota bookings`` (``what``: "quota booking")."""
    return [
        f"job {job_id} is {state.value} but holds {plural(count, what)}"
        for job_id, state, count in session.execute(
            select(Job.id, Job.state, func.count())
            .join(bookings, bookings.c.job_id == Job.id)
            .where(*conditions, Job.state != JobState.RUNNING)
            .group_by(Job.id, Job.state)
        )
    ]
