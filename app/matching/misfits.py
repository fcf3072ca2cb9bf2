"""Static fit in SQL: which workers can never run a category's jobs, and why.

Every NoMatch cell of Momotor's match table becomes an EXISTS / NOT EXISTS over the tag
rows of the two sides (docs/notations/momotor.md#matching):

=================  ===========================  =====================================
reason code        Momotor cells                meaning
=================  ===========================  =====================================
job-requires-tag   task ``t`` vs worker absent  the job requires a tag the worker
                   or ``~t``                    does not offer
worker-excludes    task ``t``/``?t`` vs ``~t``  the worker excludes a tag the job names
job-excludes-tag   task ``~t`` vs ``t``/``?t``  the job excludes a tag the worker offers
worker-requires    worker ``t`` vs task absent  the worker only takes jobs that require
                   or ``~t``                    the tag (it acts like a taint)
constraint         (RFC 31)                     the job's constraint does not hold
task-denied        (debusine #8)                tasks_allowlist/tasks_denylist refuse
                                                the job's task on the worker
task-version       (debusine #8)                the worker has not reported the task's
                                                namespace at the registered version
task-requirements  (debusine #8)                the task's declarative requirements do
                                                not hold on the effective metadata
too-few-slots      (slots)                      no queue instance has enough slots
sge-global         (SGE hard requests)          the global host rejects the job
sge-host           (SGE hard requests)          the execution host rejects the job
sge-queue          (SGE hard requests)          no queue instance of the worker fits
inventory-too-     (issue 9)                    the worker has an inventory, and one
small                                           node of it could never hold what the
                                                job needs per node (totals, not free)
=================  ===========================  =====================================

Each family compiles its own clauses (its ``sql.py``; the slot clause in
app/matching/slots.py); :data:`MISFIT_ORDER` lists them in the order above.

Results are cached as ``category_misfits`` rows written by INSERT ... SELECT, one statement
for a new category (against every worker) or for a changed worker (against every
category). Rows carry the worker's generation; readers only trust rows of the current one.
"""

from __future__ import annotations

import json
from functools import lru_cache

from sqlalchemy import (
    ColumnElement,
    ColumnExpressionArgument,
    case,
    delete,
    exists,
    false,
    insert,
    literal,
    select,
    true,
)
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.models import (
    Category,
    CategoryMisfit,
    CategoryTask,
    Task,
    Worker,
)
from app.db.tables import CATEGORY_MISFITS
from app.matching import slots
from app.matching.allocation import sql as allocation_sql
from app.matching.debusine import sql as debusine_sql
from app.matching.debusine.sql import compile_requirement
from app.matching.flux import sql as flux_sql
from app.matching.flux.sql import compile_constraint
from app.matching.gridengine import sql as gridengine_sql
from app.matching.gridengine.sql import Scope
from app.matching.momotor import sql as momotor_sql
from app.matching.reasons import MisfitClauses, MisfitPair
from app.notations.debusine.metadata import Requirement, parse_requirement
from app.notations.flux.constraints import Constraint, parse_constraint

#: The families' clause providers in CASE order: a pair's reason is the first that fails.
#: Adding a family means adding its provider here (and its codes to the table above).
MISFIT_ORDER: tuple[MisfitClauses, ...] = (
    momotor_sql.MISFITS,
    flux_sql.MISFITS,
    debusine_sql.MISFITS,
    slots.MISFITS,
    gridengine_sql.MISFITS,
    allocation_sql.MISFITS,
)

REASONS = {code: text for provider in MISFIT_ORDER for code, text in provider.reasons.items()}

#: Constrained categories compiled into one statement when a worker changes.
CONSTRAINED_PER_STATEMENT = 50


def misfit_reason(
    category: type[Category],
    worker: type[Worker],
    scope: Scope,
    constraint_ok: ColumnElement[bool] | None = None,
    requirements_ok: ColumnElement[bool] | None = None,
) -> ColumnElement[str | None]:
    """The reason code of the first failing clause for (category, worker), NULL if it fits.
    ``constraint_ok`` is the compiled RFC 31 constraint of the categories in question,
    ``requirements_ok`` the compiled requirements of their tasks; ``Task`` is the category's
    task, outer-joined (NULL columns for a category without a task). ``scope`` names the
    one category or the one worker the statement is about (the SGE clauses are sets
    narrowed to it)."""
    pair = MisfitPair(category, worker, scope.kind, constraint_ok, requirements_ok)
    return case(
        *(
            (condition, literal(code))
            for provider in MISFIT_ORDER
            for condition, code in provider.clauses(pair)
        ),
        else_=None,
    )


def _insert_misfits(
    session: Session,
    scope: Scope,
    *conditions: ColumnElement[bool],
    constraint_ok: ColumnElement[bool] | None = None,
    requirements_ok: ColumnElement[bool] | None = None,
) -> None:
    pairs = (
        select(
            Category.id.label("category_id"),
            Worker.id.label("worker_id"),
            Worker.generation.label("generation"),
            misfit_reason(Category, Worker, scope, constraint_ok, requirements_ok).label("reason"),
        )
        .select_from(Category)
        .join(Worker, true())
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .outerjoin(Task, Task.id == CategoryTask.task_id)
        .where(*conditions)
        # OFFSET 0 keeps the database from merging this SELECT into the outer one: merged,
        # the CASE ran twice per pair, once for the filter and once for the stored reason
        # (PostgreSQL's plan showed every subplan twice; issue 23).
        .offset(0)
    )
    rows = pairs.subquery()
    session.execute(
        # The Core table: an ORM insert given parameters would be a bulk insert.
        insert(CATEGORY_MISFITS).from_select(
            ["category_id", "worker_id", "generation", "reason"],
            select(rows.c.category_id, rows.c.worker_id, rows.c.generation, rows.c.reason).where(
                rows.c.reason.is_not(None)
            ),
        ),
        scope.params,
    )


@lru_cache(maxsize=4096)
def _constraint_tree(canonical_json: str) -> Constraint:
    return parse_constraint(json.loads(canonical_json))


@lru_cache(maxsize=4096)
def _constraint_predicate(category_id: int, canonical_json: str) -> ColumnElement[bool]:
    """A category's compiled constraint over ``Worker``; expressions are immutable, so one
    compiled tree serves every later worker change."""
    return compile_constraint(_constraint_tree(canonical_json), Category.id, Worker)


@lru_cache(maxsize=1024)
def _requirement_tree(canonical_json: str) -> Requirement:
    return parse_requirement(json.loads(canonical_json))


@lru_cache(maxsize=1024)
def _requirement_predicate(canonical_json: str) -> ColumnElement[bool]:
    """A task's compiled requirements over ``Worker`` (immutable, so shared by every use)."""
    return compile_requirement(_requirement_tree(canonical_json), Worker)


def _task_requirements(session: Session, task_ids: list[int] | None) -> ColumnElement[bool]:
    """The requirements of the given tasks (all with any when None) as one CASE on
    ``Task.id``; true for a task without requirements and for a category without a task.
    Task types are few (debusine has tens), so one expression holds them all."""
    query = select(Task.id, Task.requirements).where(Task.requirements.is_not(None))
    if task_ids is not None:
        query = query.where(Task.id.in_(task_ids))
    whens = {
        task_id: _requirement_predicate(text)
        for task_id, text in session.execute(query.order_by(Task.id))
        if text is not None
    }
    if not whens:
        return true()
    return case(whens, value=Task.id, else_=true())


def cache_category_misfits(
    session: Session, category: Category, task_id: int | None = None
) -> None:
    """Misfit rows of a new category (of the task ``task_id``, if any) against every
    worker (one INSERT ... SELECT)."""
    dialect.lock_matching_changes(session.connection())
    constraint_ok = None
    if category.constraint is not None:
        tree = _constraint_tree(category.constraint)
        constraint_ok = compile_constraint(tree, Category.id, Worker)
    requirements_ok = _task_requirements(session, [task_id]) if task_id is not None else None
    _insert_misfits(
        session,
        Scope(category_id=category.id),
        Category.id == category.id,
        constraint_ok=constraint_ok,
        requirements_ok=requirements_ok,
    )


def recache_task_misfits(session: Session, task_id: int) -> None:
    """Replace the misfit rows of every category of a task whose version or requirements
    changed: its categories are re-evaluated against every worker."""
    dialect.lock_matching_changes(session.connection())
    category_ids = list(
        session.scalars(select(CategoryTask.category_id).where(CategoryTask.task_id == task_id))
    )
    if not category_ids:
        return
    session.execute(delete(CategoryMisfit).where(CategoryMisfit.category_id.in_(category_ids)))
    requirements_ok = _task_requirements(session, [task_id])
    for category_id, text in session.execute(
        select(Category.id, Category.constraint).where(Category.id.in_(category_ids))
    ):
        constraint_ok = _constraint_predicate(category_id, text) if text is not None else None
        _insert_misfits(
            session,
            Scope(category_id=category_id),
            Category.id == category_id,
            constraint_ok=constraint_ok,
            requirements_ok=requirements_ok,
        )


def recache_worker_misfits(session: Session, worker_id: int) -> None:
    """Replace a changed worker's misfit rows against every category: one INSERT ... SELECT
    for the categories without a constraint, and one per CONSTRAINED_PER_STATEMENT
    constrained categories (each has its own compiled predicate)."""
    dialect.lock_matching_changes(session.connection())
    session.execute(delete(CategoryMisfit).where(CategoryMisfit.worker_id == worker_id))
    requirements_ok = _task_requirements(session, None)
    _insert_misfits(
        session,
        Scope(worker_id=worker_id),
        Worker.id == worker_id,
        Category.constraint.is_(None),
        requirements_ok=requirements_ok,
    )
    constrained = session.execute(
        select(Category.id, Category.constraint)
        .where(Category.constraint.is_not(None))
        .order_by(Category.id)
    ).all()
    for start in range(0, len(constrained), CONSTRAINED_PER_STATEMENT):
        chunk = constrained[start : start + CONSTRAINED_PER_STATEMENT]
        constraint_ok = case(
            {category_id: _constraint_predicate(category_id, text) for category_id, text in chunk},
            value=Category.id,
            else_=false(),
        )
        _insert_misfits(
            session,
            Scope(worker_id=worker_id),
            Worker.id == worker_id,
            Category.id.in_([category_id for category_id, _ in chunk]),
            constraint_ok=constraint_ok,
            requirements_ok=requirements_ok,
        )


def fits(
    category_id: ColumnExpressionArgument[int] | int,
    worker_id: ColumnExpressionArgument[int] | int,
    generation: ColumnExpressionArgument[int] | int,
) -> ColumnElement[bool]:
    """True when no misfit row of the worker's current generation rules the pair out."""
    return ~exists().where(
        CategoryMisfit.category_id == category_id,
        CategoryMisfit.worker_id == worker_id,
        CategoryMisfit.generation == generation,
    )


def worker_fits(
    category_id: ColumnExpressionArgument[int],
    worker_id: ColumnExpressionArgument[int] | int,
    generation: ColumnExpressionArgument[int] | int,
) -> ColumnElement[bool]:
    """:func:`fits` for one worker over many categories: the worker's misfits are read
    once (an index range scan on ``ix_category_misfits_worker``) instead of one lookup per
    category, which is what a pull needs."""
    return category_id.not_in(  # type: ignore[union-attr]
        select(CategoryMisfit.category_id).where(
            CategoryMisfit.worker_id == worker_id, CategoryMisfit.generation == generation
        )
    )


def fitting_workers(session: Session, category_id: int, worker_ids: frozenset[int]) -> set[int]:
    """Which of these workers the misfit cache lets run the category (at their current
    generation): the one statement a long-poll wake-up may cost (app/matching/wakeups.py)."""
    return set(
        session.scalars(
            select(Worker.id).where(
                Worker.id.in_(sorted(worker_ids)),
                fits(category_id, Worker.id, Worker.generation),
            )
        )
    )
