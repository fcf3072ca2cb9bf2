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
sge-queue-         (qmod -d, -s)                every queue instance of the worker
unavailable                                     that fits is disabled or suspended
needs-several-     (issue 35)                   the worker has no inventory and the
nodes                                           job needs several nodes (a worker
                                                without one takes part in no
                                                allocation)
inventory-too-     (issues 9, 35)               one node of the worker's inventory
small                                           could never hold what the job needs
                                                per node (totals, not free); a worker
                                                without one offers node/[core=<slots>]
=================  ===========================  =====================================

Each family compiles its own clauses (its ``sql.py``; the slot clause in
app/matching/slots.py); :data:`MISFIT_ORDER` lists them in the order above.

Results are cached per category as the smaller side of its pairs: a category lists its
misfits (``category_misfits``, with the reason code), or, when a new category would have
more than :data:`MISFITS_ALWAYS_LISTED` misfits and they outnumber its fits, it lists its
fits (``category_fits``) and says so in ``categories.lists_fits`` (issue 23: at 10,000
workers a typical category misfits 86% of them, and writing those rows was most of a new
category's cost). One evaluation of the CASE covers a new category (against every worker)
or a changed worker (against every category). Rows carry the worker's generation; readers
only trust rows of the current one, and read both sides through :func:`fits`,
:func:`fits_category` and :func:`worker_fits`. A fit-listing category's reasons are
computed when asked for (:func:`reasons_now`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    ColumnExpressionArgument,
    Insert,
    Select,
    String,
    and_,
    bindparam,
    case,
    delete,
    exists,
    false,
    func,
    insert,
    literal,
    or_,
    select,
    true,
)
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.models import (
    Category,
    CategoryFit,
    CategoryMisfit,
    CategoryTask,
    Task,
    Worker,
)
from app.db.tables import CATEGORY_FITS, CATEGORY_MISFITS
from app.matching import slots
from app.matching.allocation import sql as allocation_sql
from app.matching.debusine import sql as debusine_sql
from app.matching.debusine.sql import compile_requirement
from app.matching.flux import sql as flux_sql
from app.matching.flux.sql import compile_constraint
from app.matching.gridengine import sql as gridengine_sql
from app.matching.gridengine.sql import Scope
from app.matching.momotor import sql as momotor_sql
from app.matching.reasons import MisfitClauses, MisfitPair, scope_id
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

#: A new category with at most this many misfits lists them, whatever its fits number:
#: on a small cluster every reason then stays in v_category_fit, and listing either side
#: costs about the same there. Above it, the smaller side is listed (issue 23).
MISFITS_ALWAYS_LISTED = 64

#: The reason v_category_fit shows for a pair that a fit-listing category does not list:
#: the cache knows that the worker does not fit, not why (the API computes why).
NOT_LISTED = "not-listed"


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


#: One evaluated pair: (category id, worker id, worker generation, reason code or None
#: where it fits, whether the category lists its fits).
PairVerdict = tuple[int, int, int, str | None, bool]


def _pairs(
    scope: Scope,
    *conditions: ColumnElement[bool],
    constraint_ok: ColumnElement[bool] | None = None,
    requirements_ok: ColumnElement[bool] | None = None,
) -> Select[int, int, int, str | None, bool]:
    """The misfit CASE over the pairs of the scope that meet ``conditions``: (category,
    worker, worker generation, reason code or NULL where it fits, the category's side)."""
    return (
        select(
            Category.id.label("category_id"),
            Worker.id.label("worker_id"),
            Worker.generation.label("generation"),
            misfit_reason(Category, Worker, scope, constraint_ok, requirements_ok).label("reason"),
            Category.lists_fits.label("lists_fits"),
        )
        .select_from(Category)
        .join(Worker, true())
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .outerjoin(Task, Task.id == CategoryTask.task_id)
        .where(*conditions)
    )


def _evaluate(
    session: Session,
    scope: Scope,
    *conditions: ColumnElement[bool],
    constraint_ok: ColumnElement[bool] | None = None,
    requirements_ok: ColumnElement[bool] | None = None,
) -> list[PairVerdict]:
    """The rows of :func:`_pairs`, fetched to be routed: a category lists either its
    misfits or its fits, and a new category learns which from the counts
    (:func:`_choose_listing`). Evaluating once and writing the chosen side costs one fetch
    of small rows, where two INSERT ... SELECTs would run the CASE twice. Fetched all at
    once through the Core connection: row by row, psycopg spent 10 us per row checking
    the result (100 ms at 10,000 workers)."""
    pairs = _pairs(scope, *conditions, constraint_ok=constraint_ok, requirements_ok=requirements_ok)
    return [
        (category_id, worker_id, generation, reason, bool(lists_fits))
        for category_id, worker_id, generation, reason, lists_fits in session.connection()
        .execute(pairs, scope.params)
        .all()
    ]


def _cache_in_one_statement(
    session: Session,
    scope: Scope,
    *conditions: ColumnElement[bool],
    constraint_ok: ColumnElement[bool] | None = None,
    requirements_ok: ColumnElement[bool] | None = None,
) -> bool:
    """A new category's cache rows where the database runs INSERTs inside a WITH
    (PostgreSQL): the pairs are evaluated once, counted, and the smaller side inserted in
    the same statement; only the choice comes back. Fetching 10,000 verdicts and sending
    the chosen ids back cost more than the CASE itself (issue 23). The choice is
    :func:`_choose_listing`'s, in SQL."""
    pairs = _pairs(
        scope, *conditions, constraint_ok=constraint_ok, requirements_ok=requirements_ok
    ).cte("pairs")
    misfit_count = func.count().filter(pairs.c.reason.is_not(None))
    fit_count = func.count().filter(pairs.c.reason.is_(None))
    choice = (
        select(
            and_(misfit_count > bindparam("always_listed"), misfit_count > fit_count).label(
                "lists_fits"
            )
        )
        .select_from(pairs)
        .cte("choice")
    )
    chosen = pairs.join(choice, true())
    fit_rows = insert(CATEGORY_FITS).from_select(
        ["category_id", "worker_id", "generation"],
        select(pairs.c.category_id, pairs.c.worker_id, pairs.c.generation)
        .select_from(chosen)
        .where(choice.c.lists_fits, pairs.c.reason.is_(None)),
    )
    misfit_rows = insert(CATEGORY_MISFITS).from_select(
        ["category_id", "worker_id", "generation", "reason"],
        select(pairs.c.category_id, pairs.c.worker_id, pairs.c.generation, pairs.c.reason)
        .select_from(chosen)
        .where(~choice.c.lists_fits, pairs.c.reason.is_not(None)),
    )
    statement = select(choice.c.lists_fits).add_cte(
        fit_rows.cte("fit_rows"), misfit_rows.cte("misfit_rows")
    )
    parameters = {**scope.params, "always_listed": MISFITS_ALWAYS_LISTED}
    return bool(session.connection().execute(statement, parameters).scalar_one())


#: Ids bound into one write statement: the rows are copied server-side from the workers
#: (or categories) named, in batches well below SQLite's 32,766 bound parameters.
WRITE_BATCH = 5000


def _write(session: Session, scope: Scope, verdicts: list[PairVerdict]) -> None:
    """Store what each pair's category lists: a misfit row (with its reason) for a
    misfit-listing category, a fit row for a fit-listing one; nothing for the other side.

    The rows are written by INSERT ... SELECT from the workers (or, for a worker's scope,
    the categories) named by id, one statement per reason: sent as one parameter row each,
    10,000 rows cost the driver 30 us apiece (issue 23)."""
    groups: dict[tuple[bool, str | None], list[int]] = {}
    for category_id, worker_id, _generation, reason, lists_fits in verdicts:
        # A fit of a fit-listing category, or a misfit of a misfit-listing one.
        if lists_fits == (reason is None):
            other = worker_id if scope.kind == "category" else category_id
            groups.setdefault((lists_fits, reason), []).append(other)
    for (fit, reason), ids in groups.items():
        statement = _copy_rows(scope.kind, fit)
        for start in range(0, len(ids), WRITE_BATCH):
            parameters = {**scope.params, "ids": ids[start : start + WRITE_BATCH]}
            if not fit:
                parameters["reason"] = reason
            session.execute(statement, parameters)


@lru_cache(maxsize=4)
def _copy_rows(kind: str, fit: bool) -> Insert:
    """INSERT ... SELECT of the cache rows of the scope's one category (or one worker)
    with the workers (or categories) ``:ids``: fit rows, or misfit rows of ``:reason``.
    The worker's generation is read as the evaluation read it: matching changes are
    serialised (dialect.lock_matching_changes), so it cannot move in between."""
    ids: BindParameter[list[int]] = bindparam("ids", expanding=True)
    where: ColumnElement[bool]
    columns: list[Any]
    if kind == "category":
        columns = [scope_id(), Worker.id, Worker.generation]
        where = Worker.id.in_(ids)
    else:
        columns = [Category.id, Worker.id, Worker.generation]
        where = and_(Worker.id == scope_id(), Category.id.in_(ids))
    if fit:
        source = select(*columns)
        table, names = CATEGORY_FITS, ["category_id", "worker_id", "generation"]
    else:
        source = select(*columns, bindparam("reason", type_=String))
        table, names = CATEGORY_MISFITS, ["category_id", "worker_id", "generation", "reason"]
    if kind == "worker":
        source = source.select_from(Category).join(Worker, true())
    return insert(table).from_select(names, source.where(where))


def _rewrite(
    session: Session,
    scope: Scope,
    *conditions: ColumnElement[bool],
    constraint_ok: ColumnElement[bool] | None = None,
    requirements_ok: ColumnElement[bool] | None = None,
) -> None:
    """Evaluate the scope's pairs and write them on the side each category already lists
    (a changed worker, or a task whose requirements changed)."""
    verdicts = _evaluate(
        session, scope, *conditions, constraint_ok=constraint_ok, requirements_ok=requirements_ok
    )
    _write(session, scope, verdicts)


def _choose_listing(verdicts: list[PairVerdict]) -> bool:
    """Whether a new category lists its fits: when its misfits are more than
    :data:`MISFITS_ALWAYS_LISTED` and outnumber its fits, the fits are the smaller side."""
    misfit_count = sum(1 for verdict in verdicts if verdict[3] is not None)
    return misfit_count > MISFITS_ALWAYS_LISTED and misfit_count > len(verdicts) - misfit_count


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
    """The cache rows of a new category (of the task ``task_id``, if any) against every
    worker: the misfit CASE is evaluated once, and the category lists whichever side is
    smaller (:func:`_choose_listing`)."""
    connection = session.connection()
    dialect.lock_matching_changes(connection)
    scope = Scope(category_id=category.id)
    # Fit rows have no foreign key: clear any a deleted category of this id left behind.
    session.execute(delete(CategoryFit).where(CategoryFit.category_id == category.id))
    predicates = _category_predicates(session, category.constraint, task_id)
    if dialect.supports_writing_ctes(connection):
        lists_fits = _cache_in_one_statement(
            session, scope, Category.id == category.id, **predicates
        )
    else:
        verdicts = _evaluate(session, scope, Category.id == category.id, **predicates)
        lists_fits = _choose_listing(verdicts)
        _write(session, scope, [(c, w, g, r, lists_fits) for c, w, g, r, _ in verdicts])
    if lists_fits:
        category.lists_fits = True
        session.flush()


def _category_predicates(
    session: Session, constraint: str | None, task_id: int | None
) -> dict[str, ColumnElement[bool] | None]:
    """The compiled RFC 31 constraint and task requirements of one category, as the
    keyword arguments of :func:`_evaluate`."""
    return {
        "constraint_ok": (
            compile_constraint(_constraint_tree(constraint), Category.id, Worker)
            if constraint is not None
            else None
        ),
        "requirements_ok": (
            _task_requirements(session, [task_id]) if task_id is not None else None
        ),
    }


def reasons_now(
    session: Session, category_id: int, worker_ids: Sequence[int] | None = None
) -> dict[int, str | None]:
    """Each worker's reason code against the category (None where it fits), computed now
    by the CASE the cache is written with: how the readers learn why a fit-listing
    category does not fit a worker, since only its fits are stored. All workers, or the
    ones named."""
    category = session.get(Category, category_id)
    if category is None:
        return {}
    task_id = session.scalar(
        select(CategoryTask.task_id).where(CategoryTask.category_id == category_id)
    )
    conditions = [Category.id == category_id]
    if worker_ids is not None:
        conditions.append(Worker.id.in_(sorted(worker_ids)))
    verdicts = _evaluate(
        session,
        Scope(category_id=category_id),
        *conditions,
        **_category_predicates(session, category.constraint, task_id),
    )
    return {worker_id: reason for _, worker_id, _, reason, _ in verdicts}


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
    session.execute(delete(CategoryFit).where(CategoryFit.category_id.in_(category_ids)))
    requirements_ok = _task_requirements(session, [task_id])
    for category_id, text in session.execute(
        select(Category.id, Category.constraint).where(Category.id.in_(category_ids))
    ):
        # Each category keeps the side it chose when it was created.
        constraint_ok = _constraint_predicate(category_id, text) if text is not None else None
        _rewrite(
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
    session.execute(delete(CategoryFit).where(CategoryFit.worker_id == worker_id))
    requirements_ok = _task_requirements(session, None)
    _rewrite(
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
        _rewrite(
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
    """True when the cache lets the worker, at its current generation, run the category:
    no misfit row of that generation for a misfit-listing category, a fit row of it for a
    fit-listing one. The category's side is read in the statement, for statements built
    once for any category; :func:`fits_category` is the form for a known category."""
    lists_fits = select(Category.lists_fits).where(Category.id == category_id).scalar_subquery()
    return case(
        (lists_fits, _row_of(CategoryFit, category_id, worker_id, generation)),
        else_=~_row_of(CategoryMisfit, category_id, worker_id, generation),
    )


def fits_category(
    category: Category,
    worker_id: ColumnExpressionArgument[int] | int,
    generation: ColumnExpressionArgument[int] | int,
) -> ColumnElement[bool]:
    """:func:`fits` for a category whose side is known: a plain NOT EXISTS (an anti join
    over its misfits) or EXISTS (a walk of its few fits)."""
    if category.lists_fits:
        return _row_of(CategoryFit, category.id, worker_id, generation)
    return ~_row_of(CategoryMisfit, category.id, worker_id, generation)


def _row_of(
    table: type[CategoryMisfit] | type[CategoryFit],
    category_id: ColumnExpressionArgument[int] | int,
    worker_id: ColumnExpressionArgument[int] | int,
    generation: ColumnExpressionArgument[int] | int,
) -> ColumnElement[bool]:
    """A cache row of the pair at that generation exists in ``table``."""
    return exists().where(
        table.category_id == category_id,
        table.worker_id == worker_id,
        table.generation == generation,
    )


def pair_fits(
    category: type[Category],
    worker_id: ColumnExpressionArgument[int],
    generation: ColumnExpressionArgument[int],
) -> ColumnElement[bool]:
    """:func:`fits` for the categories and workers of an enclosing statement (``category``
    is the entity in its FROM, the worker columns another relation's): one index lookup
    per pair on the side the category lists, for statements that try many workers per
    category and stop at the first that fits (app/matching/dispatch/plain_starts.py)."""
    return or_(
        and_(category.lists_fits, _row_of(CategoryFit, category.id, worker_id, generation)),
        and_(~category.lists_fits, ~_row_of(CategoryMisfit, category.id, worker_id, generation)),
    )


def worker_fits(
    category: type[Category],
    worker_id: ColumnExpressionArgument[int] | int,
    generation: ColumnExpressionArgument[int] | int,
) -> ColumnElement[bool]:
    """:func:`fits` for one worker over many categories (``category`` is the entity in the
    statement's FROM): the worker's misfit and fit rows are each read once (index range
    scans on ``ix_category_misfits_worker`` and ``ix_category_fits_worker``) instead of
    one lookup per category, which is what a pull needs."""
    misfit_ids = select(CategoryMisfit.category_id).where(
        CategoryMisfit.worker_id == worker_id, CategoryMisfit.generation == generation
    )
    fit_ids = select(CategoryFit.category_id).where(
        CategoryFit.worker_id == worker_id, CategoryFit.generation == generation
    )
    return or_(
        and_(~category.lists_fits, category.id.not_in(misfit_ids)),
        and_(category.lists_fits, category.id.in_(fit_ids)),
    )


def fitting_workers(session: Session, category_id: int, worker_ids: frozenset[int]) -> set[int]:
    """Which of these workers the misfit cache lets run the category (at their current
    generation): the one statement a long-poll wake-up may cost (app/matching/wakeups.py)."""
    category = session.get(Category, category_id)
    if category is None:
        return set()
    return set(
        session.scalars(
            select(Worker.id).where(
                Worker.id.in_(sorted(worker_ids)),
                fits_category(category, Worker.id, Worker.generation),
            )
        )
    )
