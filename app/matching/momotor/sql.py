"""Momotor's NoMatch cells as SQL: EXISTS / NOT EXISTS over the tag rows of the two sides
(Momotor's match table; the reason codes are listed in app/matching/misfits.py).

The parser rejects one tag in two modes within a group, so each (group, value) has at most
one mode per side and these four clauses are exactly Momotor's NoMatch cases.
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import ColumnElement, and_, exists
from sqlalchemy.orm import aliased

from app.db.models import Category, CategoryTag, TagMode, Worker, WorkerTag
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause

_OFFERED = (TagMode.REQUIRED, TagMode.OPTIONAL)

REASONS = {
    "job-requires-tag": "the job requires a tag the worker does not offer",
    "worker-excludes-tag": "the worker excludes a tag the job asks for",
    "job-excludes-tag": "the job excludes a tag the worker offers",
    "worker-requires-tag": "the worker requires a tag the job does not ask for",
}


def _tag_pair(category_tag: type[CategoryTag], worker_tag: type[WorkerTag]) -> ColumnElement[bool]:
    return and_(
        worker_tag.group_name == category_tag.group_name, worker_tag.value == category_tag.value
    )


@lru_cache(maxsize=8)
def _tag_clauses(category: type[Category], worker: type[Worker]) -> tuple[ReasonClause, ...]:
    """The four tag clauses. Expressions are immutable, so they are built once: aliasing
    the models costs tens of ms a time."""
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
    return (
        (job_requires, "job-requires-tag"),
        (worker_excludes, "worker-excludes-tag"),
        (job_excludes, "job-excludes-tag"),
        (worker_requires, "worker-requires-tag"),
    )


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _tag_clauses(pair.category, pair.worker)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
