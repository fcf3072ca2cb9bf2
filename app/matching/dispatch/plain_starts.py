"""Would a pull start this job now, asked of many waiting jobs at once: which worker's
next pull would start each (were the job its best), in one statement, for the jobs and
workers of the plain kind; and whether any worker at all has room for each.

A demand report (app/matching/demand/) asks this of the first waiting job of every
category. Rehearsing a pull per category (``would_start`` of app/matching/dispatch/pull.py,
in a savepoint rolled back) cost 20-35 ms each, 14 s at 500 categories (bench/demand.py).

This is the pull's own decision, written over many workers instead of one: it is built
from the pull's own expressions, so the two cannot drift apart.

- The worker: active, with a free slot (:func:`puller.workers_with_room`, the lock's
  rule), and one a plain take serves (:func:`puller.plain_take_serves`: no inventory,
  no Grid Engine values, no placed job).
- The category: as the heads query admits it for that worker (``head_fit`` of
  app/matching/dispatch/pull_heads.py, the cache's verdict looked up per pair), and one
  whose head a plain claim takes (``plain_category``).
- The job: as ``job_fit`` admits it (waiting, not held back by its array, not a task of
  an array with a limit), and of a task without a ``can_run_on`` plug-in.

For such a pair every step of ``would_start`` passes: the claim of a waiting job books
the room the worker has. A job outside these kinds (Grid Engine values, inventories,
plug-ins, arrays with a limit) gets no starter here; the caller rehearses it as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import and_, case, exists, or_, select, true
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.models import Category, CategoryTask, Job, Task, Worker, WorkerState
from app.matching.dispatch.pull_heads import PullerTerms, head_fit, plain_category
from app.matching.dispatch.puller import plain_take_serves, workers_with_room
from app.matching.dispatch.task_limits import limited_array, not_held_back
from app.matching.misfits import pair_fits
from app.matching.slots import WAITING


@dataclass(frozen=True)
class StartNow:
    """One waiting job: the name of a worker whose pull would start it now were it that
    worker's best job (None: none of the plain kind would); whether some active worker
    the cache lets run it has a queue instance with the job's slots free (if not, no
    pull starts it now: it waits for room); and whether ``starter`` is the whole answer
    (``decided``: the job is of the plain kind and, when one worker was asked about, so
    is that worker, or it has no room at all) or a pull must be rehearsed to know."""

    job_id: int
    starter: str | None
    room: bool
    decided: bool


def starts_now(
    session: Session, job_ids: Iterable[int], *, worker_id: int | None = None
) -> dict[int, StartNow]:
    """:class:`StartNow` of each of the waiting jobs, by job id (a job no longer waiting
    has no starter and no room), over every worker or only ``worker_id``."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    room = workers_with_room()
    active = Worker.state == WorkerState.ACTIVE
    if worker_id is not None:
        active = and_(active, Worker.id == worker_id)
    roomy = (
        select(
            Worker.id,
            Worker.generation,
            Worker.name,
            room.c.max_free,
            plain_take_serves(Worker.id.expression).label("plain"),
        )
        .join(room, room.c.worker_id == Worker.id)
        .where(active)
        .cte("roomy")
    )
    terms = PullerTerms(roomy.c.id, roomy.c.generation, roomy.c.max_free)
    plain_job = and_(Job.state == WAITING, not_held_back(), limited_array(Job.array_id).is_(None))
    plain_request = exists(
        select(Category.id)
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .outerjoin(Task, Task.id == CategoryTask.task_id)
        .where(
            Category.id == Job.category_id,
            plain_category(False),
            or_(CategoryTask.task_id.is_(None), Task.plugin.is_(None)),
        )
    )
    # Asked about one worker: a worker with no room starts nothing (decided), one of
    # another kind than the plain take's is rehearsed.
    worker_plain = select(roomy.c.plain).scalar_subquery() if worker_id is not None else true()
    # Three layers, each kept apart by OFFSET 0 (PostgreSQL would fold them into one
    # and run the starter's subquery once per mention): the jobs asked about, the
    # starter of the plain ones, and room looked for only where no starter was found.
    asked = (
        select(
            Job.id.label("job_id"),
            Job.category_id,
            (Job.state == WAITING).label("waiting"),
            and_(plain_job, plain_request).label("plain"),
            worker_plain.label("worker_plain"),
        )
        .where(dialect.among_ids(session.connection(), Job.id.expression, ids))
        .offset(0)
        .subquery("asked")
    )
    # The category joins inside each subquery, beside the workers: the cache's EXISTS
    # nested in these subqueries correlate with their own enclosing SELECT only, and
    # would read another, uncorrelated categories table.
    starter = (
        select(roomy.c.name)
        .select_from(roomy)
        .join(Category, Category.id == asked.c.category_id)
        .where(roomy.c.plain, *head_fit(False, False, terms, fit_test=pair_fits))
        .limit(1)
        .scalar_subquery()
    )
    found = select(asked, case((asked.c.plain, starter), else_=None).label("starter"))
    found_rows = found.offset(0).subquery("found")
    some_room = exists(
        select(roomy.c.id)
        .select_from(roomy)
        .join(Category, Category.id == found_rows.c.category_id)
        .where(
            roomy.c.max_free >= Category.slots,
            pair_fits(Category, roomy.c.id, roomy.c.generation),
        )
    )
    room = case(
        (found_rows.c.starter.is_not(None), true()),
        else_=and_(found_rows.c.waiting, some_room),
    )
    rows = session.execute(
        select(
            found_rows.c.job_id,
            found_rows.c.starter,
            room,
            found_rows.c.plain,
            found_rows.c.worker_plain,
        )
    ).all()
    return {
        job_id: StartNow(
            job_id,
            name,
            bool(has_room),
            bool(plain) and (worker_is_plain is None or bool(worker_is_plain)),
        )
        for job_id, name, has_room, plain, worker_is_plain in rows
    }


__all__ = ["StartNow", "starts_now"]
