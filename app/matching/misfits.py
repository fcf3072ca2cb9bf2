"""Static fit in SQL: which workers can never run a category's jobs, and why.

Every NoMatch cell of Momotor's match table becomes an EXISTS / NOT EXISTS over the tag
rows of the two sides (research/momotor.md, table (a) and section (b)):

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
too-few-slots      (slots)                      no queue instance has enough slots
inventory-too-     (issue 9)                    the worker has an inventory, and one
small                                           node of it could never hold what the
                                                job needs per node (totals, not free)
=================  ===========================  =====================================

The parser rejects one tag in two modes within a group, so each (group, value) has at most
one mode per side and these cells are exactly Momotor's NoMatch cases.

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
    and_,
    case,
    delete,
    exists,
    false,
    func,
    insert,
    literal,
    not_,
    select,
    true,
)
from sqlalchemy.orm import Session, aliased

from app.db import dialect
from app.db.models import (
    Category,
    CategoryMisfit,
    CategoryNodeNeed,
    CategoryTag,
    InventoryCount,
    QueueInstance,
    TagMode,
    Worker,
    WorkerInventory,
    WorkerTag,
)
from app.matching.constraint_sql import compile_constraint
from app.notations.constraints import Constraint, parse_constraint

_OFFERED = (TagMode.REQUIRED, TagMode.OPTIONAL)

REASONS = {
    "job-requires-tag": "the job requires a tag the worker does not offer",
    "worker-excludes-tag": "the worker excludes a tag the job asks for",
    "job-excludes-tag": "the job excludes a tag the worker offers",
    "worker-requires-tag": "the worker requires a tag the job does not ask for",
    "constraint": "the job's RFC 31 constraint does not hold on the worker",
    "too-few-slots": "no queue instance of the worker has enough slots",
    "inventory-too-small": "the worker's whole inventory is smaller than what the job needs "
    "on one node",
}

#: Constrained categories compiled into one statement when a worker changes.
CONSTRAINED_PER_STATEMENT = 50


def _tag_pair(category_tag: type[CategoryTag], worker_tag: type[WorkerTag]) -> ColumnElement[bool]:
    return and_(
        worker_tag.group_name == category_tag.group_name, worker_tag.value == category_tag.value
    )


def misfit_reason(
    category: type[Category],
    worker: type[Worker],
    constraint_ok: ColumnElement[bool] | None = None,
) -> ColumnElement[str | None]:
    """The reason code of the first failing clause for (category, worker), NULL if it fits.
    ``constraint_ok`` is the compiled RFC 31 constraint of the categories in question."""
    ct, wt = aliased(CategoryTag), aliased(WorkerTag)
    job_requires = exists().where(
        ct.category_id == category.id,
        ct.mode == TagMode.REQUIRED,
        # Correlate explicitly: SQLAlchemy's automatic correlation stops at the enclosing
        # SELECT and would give this subquery a FROM of its own for the outer table.
        ~exists()
        .where(wt.worker_id == worker.id, _tag_pair(ct, wt), wt.mode.in_(_OFFERED))
        .correlate_except(wt),
    )
    ct2, wt2 = aliased(CategoryTag), aliased(WorkerTag)
    worker_excludes = exists().where(
        ct2.category_id == category.id,
        ct2.mode.in_(_OFFERED),
        wt2.worker_id == worker.id,
        _tag_pair(ct2, wt2),
        wt2.mode == TagMode.EXCLUDED,
    )
    ct3, wt3 = aliased(CategoryTag), aliased(WorkerTag)
    job_excludes = exists().where(
        ct3.category_id == category.id,
        ct3.mode == TagMode.EXCLUDED,
        wt3.worker_id == worker.id,
        _tag_pair(ct3, wt3),
        wt3.mode.in_(_OFFERED),
    )
    ct4, wt4 = aliased(CategoryTag), aliased(WorkerTag)
    worker_requires = exists().where(
        wt4.worker_id == worker.id,
        wt4.mode == TagMode.REQUIRED,
        ~exists()
        .where(ct4.category_id == category.id, _tag_pair(ct4, wt4), ct4.mode.in_(_OFFERED))
        .correlate_except(ct4),
    )
    largest_slots = (
        select(func.coalesce(func.max(QueueInstance.slots), 0))
        .where(QueueInstance.worker_id == worker.id)
        .scalar_subquery()
    )
    # Workers without an inventory are not managed: a jobspec never rules them out.
    inventory_too_small = and_(
        exists().where(WorkerInventory.worker_id == worker.id),
        exists().where(
            CategoryNodeNeed.category_id == category.id,
            ~exists()
            .where(
                InventoryCount.worker_id == worker.id,
                InventoryCount.type == CategoryNodeNeed.type,
                InventoryCount.unit == CategoryNodeNeed.unit,
                InventoryCount.total >= CategoryNodeNeed.amount,
            )
            .correlate_except(InventoryCount),
        ),
    )
    return case(
        (job_requires, literal("job-requires-tag")),
        (worker_excludes, literal("worker-excludes-tag")),
        (job_excludes, literal("job-excludes-tag")),
        (worker_requires, literal("worker-requires-tag")),
        (not_(constraint_ok if constraint_ok is not None else true()), literal("constraint")),
        (largest_slots < category.slots, literal("too-few-slots")),
        (inventory_too_small, literal("inventory-too-small")),
        else_=None,
    )


def _insert_misfits(
    session: Session,
    *conditions: ColumnElement[bool],
    constraint_ok: ColumnElement[bool] | None = None,
) -> None:
    pairs = (
        select(
            Category.id.label("category_id"),
            Worker.id.label("worker_id"),
            Worker.generation.label("generation"),
            misfit_reason(Category, Worker, constraint_ok).label("reason"),
        )
        .select_from(Category)
        .join(Worker, true())
        .where(*conditions)
    )
    rows = pairs.subquery()
    session.execute(
        insert(CategoryMisfit).from_select(
            ["category_id", "worker_id", "generation", "reason"],
            select(rows.c.category_id, rows.c.worker_id, rows.c.generation, rows.c.reason).where(
                rows.c.reason.is_not(None)
            ),
        )
    )


@lru_cache(maxsize=4096)
def _constraint_tree(canonical_json: str) -> Constraint:
    return parse_constraint(json.loads(canonical_json))


@lru_cache(maxsize=4096)
def _constraint_predicate(category_id: int, canonical_json: str) -> ColumnElement[bool]:
    """A category's compiled constraint over ``Worker``; expressions are immutable, so one
    compiled tree serves every later worker change."""
    return compile_constraint(_constraint_tree(canonical_json), Category.id, Worker)


def cache_category_misfits(session: Session, category: Category) -> None:
    """Misfit rows of a new category against every worker (one INSERT ... SELECT)."""
    dialect.lock_matching_changes(session.connection())
    constraint_ok = None
    if category.constraint is not None:
        tree = _constraint_tree(category.constraint)
        constraint_ok = compile_constraint(tree, Category.id, Worker)
    _insert_misfits(session, Category.id == category.id, constraint_ok=constraint_ok)


def recache_worker_misfits(session: Session, worker_id: int) -> None:
    """Replace a changed worker's misfit rows against every category: one INSERT ... SELECT
    for the categories without a constraint, and one per CONSTRAINED_PER_STATEMENT
    constrained categories (each has its own compiled predicate)."""
    dialect.lock_matching_changes(session.connection())
    session.execute(delete(CategoryMisfit).where(CategoryMisfit.worker_id == worker_id))
    _insert_misfits(session, Worker.id == worker_id, Category.constraint.is_(None))
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
            Worker.id == worker_id,
            Category.id.in_([category_id for category_id, _ in chunk]),
            constraint_ok=constraint_ok,
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
