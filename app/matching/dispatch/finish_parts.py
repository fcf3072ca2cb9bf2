"""Statement pieces that both fast ends of a job write the same way: the job's ending
values, the slots its allocations give back, and the event that records the end.

finish_sql.py ends a job that holds only slots, finish_pg.py one that holds inventory
vertices too; both write these three things, so they are built here once. Each builder
takes the statement's own bind parameters for the job and the time (their types differ
between the two modules) and returns an expression to embed, so the SQL each module
sends is what it sent when it built them itself.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, func, insert, select, update

from app.db.models import JobState
from app.db.tables import ALLOCATIONS, JOB_EVENTS, JOBS, QUEUE_INSTANCES


def runs_on(worker: Any) -> Any:
    """The job is the worker's (``worker``: its id, an SQL expression), compared through
    ``coalesce`` so that no plan can look the ended job up by its worker.

    An end finds its job by id. Compared plainly, ``worker_id`` offers the planner its
    index, and a plan made on statistics taken while most jobs had no worker yet (after a
    bulk submission, or an ANALYZE before a drain) estimates that index at one row and
    takes it: every end then read every job the worker ever ran, a cost that grows with
    the worker's history (issue 38: 0.12 ms of PostgreSQL CPU per job on average over a
    drain of 750 jobs a worker). Ids start at 1, so ``coalesce(worker_id, 0)`` matches
    what the plain comparison matches."""
    return func.coalesce(JOBS.c.worker_id, 0) == worker


def end_values(failed: bool, now: Any) -> dict[str, Any]:
    """The columns a job's end sets: its final state, when it ended, what the worker
    reported (``p_exit_code``, ``p_output``) and, when it failed, why (``p_reason``)."""
    values: dict[str, Any] = {
        "state": JobState.FAILED if failed else JobState.FINISHED,
        "ended_at": now,
        "exit_code": bindparam("p_exit_code"),
        "output": bindparam("p_output"),
    }
    if failed:
        values["failure_reason"] = bindparam("p_reason")
    return values


def give_back_slots(job: Any, now: Any) -> Any:
    """PostgreSQL: one UPDATE that ends the job's open allocations (a CTE) and gives
    their slots back to their queue instances."""
    return _give_back(ALLOCATIONS.c.job_id == job, now)


def give_back_slots_of(jobs: Any, now: Any) -> Any:
    """:func:`give_back_slots` for every job of ``jobs`` (a SELECT of job ids)."""
    return _give_back(ALLOCATIONS.c.job_id.in_(jobs), now)


def _give_back(holders: Any, now: Any) -> Any:
    released = (
        update(ALLOCATIONS)
        .where(holders, ALLOCATIONS.c.released_at.is_(None))
        .values(released_at=now)
        .returning(ALLOCATIONS.c.queue_instance_id, ALLOCATIONS.c.slots)
        .cte("released")
    )
    freed = (
        select(released.c.queue_instance_id, func.sum(released.c.slots).label("slots"))
        .group_by(released.c.queue_instance_id)
        .subquery("freed")
    )
    return (
        update(QUEUE_INSTANCES)
        .where(QUEUE_INSTANCES.c.id == freed.c.queue_instance_id)
        .values(used_slots=QUEUE_INSTANCES.c.used_slots - freed.c.slots)
    )


def record_end(job: Any, now: Any, kind: Any) -> Any:
    """The INSERT of the job's history event ``kind`` (finished or failed), with the
    reporting worker (``p_worker``) and its reason (``p_detail``)."""
    return insert(JOB_EVENTS).values(_event_values(job, now, kind))


def record_end_of(ended: Any, now: Any, kind: Any) -> Any:
    """:func:`record_end` for each job of ``ended`` (a CTE of ended jobs): no row when it
    ended none, so a statement whose end was conditional records nothing either."""
    values = _event_values(ended.c.id, now, kind)
    return insert(JOB_EVENTS).from_select(list(values), select(*values.values()))


def _event_values(job: Any, now: Any, kind: Any) -> dict[str, Any]:
    return {
        "job_id": job,
        "kind": kind,
        "worker": bindparam("p_worker", type_=JOB_EVENTS.c.worker.type),
        "detail": bindparam("p_detail", type_=JOB_EVENTS.c.detail.type),
        "at": now,
    }
