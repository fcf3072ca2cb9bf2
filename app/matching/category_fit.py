"""Reading categories: what each asks for, how many of its jobs wait and run, and which
workers fit it (the SQL view ``v_category_fit`` as an API answer).

A category is the set of jobs with equal requests (app/matching/categories.py); its fit over
the workers is the misfit cache of app/matching/misfits.py read at each worker's current
generation, with the reason code of the first failing clause and what the code means.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, select
from sqlalchemy.orm import Session

from app.db.models import (
    Category,
    CategoryFit,
    CategoryMisfit,
    CategoryShape,
    CategoryTask,
    Job,
    JobState,
    Task,
    Worker,
)
from app.matching.errors import NotFoundError
from app.matching.misfits import REASONS, fits_category, reasons_now
from app.wire.categories import CategoryRequest, WorkerFit
from app.words import plural

#: The Grid Engine request text of a category without hard or soft requests.
NO_REQUESTS = "NONE"


@dataclass(frozen=True)
class CategoryView:
    id: int
    created_at: datetime
    request: CategoryRequest
    waiting: int
    running: int
    #: How many workers fit the category (whatever their state).
    fitting_workers: int


def category_request(category: Category, task: str | None) -> CategoryRequest:
    """What the category's jobs ask for, per family in its own notation."""
    return CategoryRequest(
        resources=category.resources,
        slots=category.slots,
        constraint=json.loads(category.constraint) if category.constraint else None,
        jobspec=json.loads(category.jobspec) if category.jobspec else None,
        hard=None if category.hard == NO_REQUESTS else category.hard,
        soft=None if category.soft == NO_REQUESTS else category.soft,
        pe=category.pe,
        pe_slots=f"{category.pe_min}-{category.pe_max}" if category.pe is not None else None,
        task=task,
    )


def _count(state: JobState) -> Any:
    return (
        select(func.count(Job.id))
        .where(Job.category_id == Category.id, Job.state == state)
        .scalar_subquery()
    )


def current_misfit(category_id: Any) -> ColumnElement[bool]:
    """The condition under which a misfit row rules ``Worker`` out of the category
    ``category_id`` (a value or a column): the row is of that pair and of the worker's
    current generation. Rows of an older generation are stale and never read; this is the
    one place that says so for the readers of the cache."""
    return and_(
        CategoryMisfit.category_id == category_id,
        CategoryMisfit.worker_id == Worker.id,
        CategoryMisfit.generation == Worker.generation,
    )


def _fitting_workers() -> Any:
    """How many workers fit the outer category: those with no misfit row of their
    generation for a misfit-listing category, those with a fit row of it for a fit-listing
    one."""
    misfit = (
        select(CategoryMisfit.worker_id)
        .where(current_misfit(Category.id))
        .correlate(Category, Worker)
    )
    without_misfit = (
        select(func.count(Worker.id)).where(~misfit.exists()).correlate(Category).scalar_subquery()
    )
    with_fit = (
        select(func.count(CategoryFit.worker_id))
        .join(Worker, Worker.id == CategoryFit.worker_id)
        .where(CategoryFit.category_id == Category.id, CategoryFit.generation == Worker.generation)
        .correlate(Category)
        .scalar_subquery()
    )
    fitting = case((Category.lists_fits, with_fit), else_=without_misfit)
    # A job needing more nodes than fit (issue 35) is held by no set of workers: none fits.
    nodes = (
        select(func.coalesce(func.max(CategoryShape.min_nodes), 0))
        .where(CategoryShape.category_id == Category.id)
        .correlate(Category)
        .scalar_subquery()
    )
    return case((nodes > fitting, 0), else_=fitting)


@dataclass(frozen=True)
class TooFewNodes:
    """A category whose jobs need more nodes than there are registered workers that fit
    it (a worker is one node): no set of workers could ever hold one of its jobs."""

    needed: int
    found: int

    @property
    def words(self) -> str:
        return (
            f"the job needs {plural(self.needed, 'node')} (one worker is one node) and only "
            f"{plural(self.found, 'registered worker')} could hold a node of it: no set of "
            "workers could ever hold it"
        )


def too_few_nodes(session: Session, category_id: int) -> TooFewNodes | None:
    """The category's :class:`TooFewNodes`, or None when it needs at most one node or
    enough workers fit it (whatever their state: a drained or disabled worker may come
    back). What the explanation (``needs-several-nodes``), candidates and the categories'
    fitting counts all say of such a job (issue 35)."""
    needed = session.scalar(
        select(CategoryShape.min_nodes).where(CategoryShape.category_id == category_id)
    )
    if needed is None or needed <= 1:
        return None
    category = session.get(Category, category_id)
    assert category is not None
    found = int(
        session.scalar(
            select(func.count(Worker.id)).where(
                fits_category(category, Worker.id, Worker.generation)
            )
        )
        or 0
    )
    return TooFewNodes(needed, found) if found < needed else None


def _views(session: Session, *conditions: Any, limit: int, offset: int) -> list[CategoryView]:
    rows = session.execute(
        select(
            Category,
            Task.name,
            _count(JobState.WAITING),
            _count(JobState.RUNNING),
            _fitting_workers(),
        )
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .outerjoin(Task, Task.id == CategoryTask.task_id)
        .where(*conditions)
        .order_by(Category.id)
        .limit(limit)
        .offset(offset)
    ).all()
    return [
        CategoryView(
            id=category.id,
            created_at=category.created_at,
            request=category_request(category, task),
            waiting=int(waiting),
            running=int(running),
            fitting_workers=int(fitting),
        )
        for category, task, waiting, running, fitting in rows
    ]


def list_categories(session: Session, *, limit: int, offset: int) -> list[CategoryView]:
    """Categories in id order (the order they were first asked for)."""
    return _views(session, limit=limit, offset=offset)


def get_category(session: Session, category_id: int) -> CategoryView:
    found = _views(session, Category.id == category_id, limit=1, offset=0)
    if not found:
        raise NotFoundError(f"no category with id {category_id}")
    return found[0]


def category_fit(session: Session, category_id: int) -> list[WorkerFit]:
    """Every worker against the category, by name: what ``v_category_fit`` says (a misfit
    row of the worker's current generation, or none), with the words of each code. For a
    category that lists its fits, the reasons are computed now (the cache holds none)."""
    category = session.get(Category, category_id)
    if category is not None and category.lists_fits:
        reasons = reasons_now(session, category_id)
        rows = [
            (name, state, reasons.get(worker_id))
            for worker_id, name, state in session.execute(
                select(Worker.id, Worker.name, Worker.state).order_by(Worker.name)
            )
        ]
    else:
        rows = [
            (name, state, reason)
            for name, state, reason in session.execute(
                select(Worker.name, Worker.state, CategoryMisfit.reason)
                .outerjoin(CategoryMisfit, current_misfit(category_id))
                .order_by(Worker.name)
            )
        ]
    short = too_few_nodes(session, category_id)
    if short is not None:
        rows = [(name, state, reason or "needs-several-nodes") for name, state, reason in rows]
    return [
        WorkerFit(
            worker=name,
            state=state,
            fits=reason is None,
            reason=reason,
            message=REASONS.get(reason) if reason is not None else None,
        )
        for name, state, reason in rows
    ]
