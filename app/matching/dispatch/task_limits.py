"""Grid Engine's ``qsub -tc``: a pull never starts a task of an array that already runs
``task_concurrency`` of its tasks.

The heads query leaves out the waiting tasks of a full array (:func:`not_held_back`), so
that the next best job of the category is a head instead; a task of an array with a limit
is never ``plain`` (:func:`limited_array`), so the one-statement take and the express lane
hand it to the general way, which locks the array's row and counts its running tasks
again before it claims one (:func:`array_has_room`). Only pulls lock arrays, after the
worker and before the job (the lock order of app/matching/dispatch/pull.py); finishes,
returns and cancels only ever make room. A scheduling run (POST /v1/schedule), which
holds every worker's lock, counts each array's room down as it starts tasks
(:func:`room_of_arrays`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, bindparam, exists, func, literal_column, or_, select
from sqlalchemy.orm import Session, aliased

from app.db.models import Job, JobArray, JobState

_RUNNING_TASK = aliased(Job, name="running_task")
#: A literal, as WAITING (app/matching/slots.py), so that plans can use what it proves.
RUNNING: Any = literal_column(f"'{JobState.RUNNING.value}'")


def running_tasks(array_id: Any) -> Any:
    """How many tasks of the array run now (``ix_jobs_array_state``)."""
    return (
        select(func.count())
        .select_from(_RUNNING_TASK)
        .where(_RUNNING_TASK.array_id == array_id, _RUNNING_TASK.state == RUNNING)
        .scalar_subquery()
    )


def not_held_back(job: Any = Job) -> ColumnElement[bool]:
    """The waiting job is not a task of an array that runs its ``task_concurrency``
    tasks already."""
    full = exists().where(
        JobArray.id == job.array_id,
        JobArray.task_concurrency.is_not(None),
        JobArray.task_concurrency <= running_tasks(JobArray.id),
    )
    return or_(job.array_id.is_(None), ~full)


def limited_array(array_id: Any) -> Any:
    """The array's id when it limits its running tasks (qsub -tc), else NULL."""
    return (
        select(JobArray.id)
        .where(JobArray.id == array_id, JobArray.task_concurrency.is_not(None))
        .scalar_subquery()
    )


_LOCK_ARRAY = (
    select(JobArray.task_concurrency)
    .where(JobArray.id == bindparam("p_array_id"))
    .with_for_update()
)
_RUNNING = select(running_tasks(bindparam("p_array_id")))


def array_has_room(session: Session, array_id: int) -> bool:
    """Lock the array and say whether one more of its tasks may start. The count is a
    statement of its own: on PostgreSQL (READ COMMITTED) it then reads with a snapshot
    taken after the lock was granted, so it sees the tasks that a concurrent pull, which
    held the lock, started."""
    limit = session.scalar(_LOCK_ARRAY, {"p_array_id": array_id})
    if limit is None:
        return True
    running = session.scalar(_RUNNING, {"p_array_id": array_id}) or 0
    return bool(running < limit)


def array_is_full(session: Session, job: Job) -> bool:
    """Without locking: whether the job is a task of an array that runs its
    ``task_concurrency`` tasks already (for the explanation's words)."""
    if job.array_id is None:
        return False
    row = session.execute(
        select(JobArray.task_concurrency, running_tasks(JobArray.id)).where(
            JobArray.id == job.array_id
        )
    ).one_or_none()
    return row is not None and row[0] is not None and row[1] >= row[0]


def room_of_arrays(session: Session, array_ids: set[int | None]) -> dict[int | None, int]:
    """For each of these arrays that limits its running tasks, how many more may start
    now (a scheduling run, app/matching/gridengine/run.py, counts them down)."""
    ids = sorted(i for i in array_ids if i is not None)
    if not ids:
        return {}
    rows = session.execute(
        select(JobArray.id, JobArray.task_concurrency - running_tasks(JobArray.id)).where(
            JobArray.id.in_(ids), JobArray.task_concurrency.is_not(None)
        )
    ).all()
    return {array_id: room for array_id, room in rows}
