"""The waiting work by category, in one statement: how many jobs wait, since when, the
first of them (the one a category's answer is judged on: every job of a category asks for
the same things) and whether any registered worker fits it at all (the misfit cache)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, exists, func, or_, select
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.models import (
    Category,
    CategoryFit,
    CategoryMisfit,
    CategoryShape,
    CategoryTask,
    Job,
    Task,
    Worker,
)
from app.matching.slots import WAITING


@dataclass(frozen=True)
class WaitingCategory:
    """A category with waiting jobs: the category, its task's name, how many wait, when
    the oldest was submitted, the lowest waiting job id, the nodes one job needs (0: no
    shape), whether some registered worker fits it, whatever its state, and whether its
    task has a ``can_run_on`` plug-in."""

    category: Category
    task: str | None
    waiting: int
    oldest: datetime
    first_job: int
    nodes: int
    any_fit: bool
    plugin: bool = False


def _some_worker_fits() -> ColumnElement[bool]:
    """Whether some worker fits the outer category at its current generation, read on the
    side the category lists (app/matching/misfits.py ``fits``, as one EXISTS per side)."""
    fit_row = exists(
        select(CategoryFit.worker_id)
        .join(Worker, Worker.id == CategoryFit.worker_id)
        .where(CategoryFit.category_id == Category.id, CategoryFit.generation == Worker.generation)
        .correlate(Category)
    )
    misfit_row = (
        exists()
        .where(
            CategoryMisfit.category_id == Category.id,
            CategoryMisfit.worker_id == Worker.id,
            CategoryMisfit.generation == Worker.generation,
        )
        .correlate(Category, Worker)
    )
    no_misfit = exists(select(Worker.id).where(~misfit_row).correlate(Category))
    return or_(and_(Category.lists_fits, fit_row), and_(~Category.lists_fits, no_misfit))


def waiting_categories(session: Session) -> list[WaitingCategory]:
    """Every category with waiting jobs, by id. The fit test is an EXISTS over the
    cache's side of each category (its fit rows, or an anti join of its misfits), so a
    category that some worker fits stops at the first one."""
    grouped = (
        select(
            Job.category_id.label("category_id"),
            func.count(Job.id).label("waiting"),
            func.min(Job.submitted_at).label("oldest"),
            func.min(Job.id).label("first_job"),
        )
        # The literal state, for the partial index on waiting jobs (app/matching/slots.py).
        .where(Job.state == WAITING)
        .group_by(Job.category_id)
        .subquery()
    )
    any_fit = _some_worker_fits()
    with dialect.grouping_by_index(session.connection()):
        rows = session.execute(
            select(
                Category,
                Task.name,
                grouped.c.waiting,
                grouped.c.oldest,
                grouped.c.first_job,
                func.coalesce(CategoryShape.min_nodes, 0),
                any_fit,
                Task.plugin.is_not(None),
            )
            .join(grouped, grouped.c.category_id == Category.id)
            .outerjoin(CategoryShape, CategoryShape.category_id == Category.id)
            .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
            .outerjoin(Task, Task.id == CategoryTask.task_id)
            .order_by(Category.id)
        ).all()
    return [
        WaitingCategory(
            category, task, int(waiting), oldest, int(first), int(nodes), bool(fit), bool(plugin)
        )
        for category, task, waiting, oldest, first, nodes, fit, plugin in rows
    ]
