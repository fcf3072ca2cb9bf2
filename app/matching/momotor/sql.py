"""Momotor's NoMatch cells as SQL: EXISTS / NOT EXISTS over the tag rows of the two sides
(Momotor's match table; the reason codes are listed in app/matching/misfits.py).

The parser rejects one tag in two modes within a group, so each (group, value) has at most
one mode per side and these four clauses are exactly Momotor's NoMatch cases.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from sqlalchemy import ColumnElement, SQLColumnExpression, and_, exists
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


class _TagRows(NamedTuple):
    """One side's tag rows in a clause: the aliased table, the condition that picks the
    side's own rows (the category's or the worker's) and their mode column."""

    table: type[CategoryTag] | type[WorkerTag]
    owned: ColumnElement[bool]
    mode: SQLColumnExpression[TagMode]


def _both_sides(
    category: type[Category], worker: type[Worker]
) -> tuple[_TagRows, _TagRows, ColumnElement[bool]]:
    """Fresh aliases of the category's and the worker's tag rows, and their same-tag join."""
    ct, wt = aliased(CategoryTag), aliased(WorkerTag)
    return (
        _TagRows(ct, ct.category_id == category.id, ct.mode),
        _TagRows(wt, wt.worker_id == worker.id, wt.mode),
        _tag_pair(ct, wt),
    )


def _required_not_offered(
    requiring: _TagRows, offering: _TagRows, same_tag: ColumnElement[bool]
) -> ColumnElement[bool]:
    """One side requires a tag that the other side does not offer."""
    return exists().where(
        requiring.owned,
        requiring.mode == TagMode.REQUIRED,
        # Correlate explicitly: SQLAlchemy's automatic correlation stops at the enclosing
        # SELECT and would give this subquery a FROM of its own for the outer table.
        ~exists()
        .where(offering.owned, same_tag, offering.mode.in_(_OFFERED))
        .correlate_except(offering.table),
    )


def _excluded_and_offered(
    job: _TagRows, worker: _TagRows, same_tag: ColumnElement[bool], *, job_excludes: bool
) -> ColumnElement[bool]:
    """A tag both sides name, excluded by one (the job when ``job_excludes``) and offered
    by the other."""
    excluded, offered = TagMode.EXCLUDED, _OFFERED
    job_mode = job.mode == excluded if job_excludes else job.mode.in_(offered)
    worker_mode = worker.mode.in_(offered) if job_excludes else worker.mode == excluded
    return exists().where(job.owned, job_mode, worker.owned, same_tag, worker_mode)


@lru_cache(maxsize=8)
def _tag_clauses(category: type[Category], worker: type[Worker]) -> tuple[ReasonClause, ...]:
    """The four tag clauses. Expressions are immutable, so they are built once: aliasing
    the models costs tens of ms a time."""
    job_tags, worker_tags, same_tag = _both_sides(category, worker)
    job_requires = _required_not_offered(job_tags, worker_tags, same_tag)
    worker_excludes = _excluded_and_offered(*_both_sides(category, worker), job_excludes=False)
    job_excludes = _excluded_and_offered(*_both_sides(category, worker), job_excludes=True)
    job_tags, worker_tags, same_tag = _both_sides(category, worker)
    worker_requires = _required_not_offered(worker_tags, job_tags, same_tag)
    return (
        (job_requires, "job-requires-tag"),
        (worker_excludes, "worker-excludes-tag"),
        (job_excludes, "job-excludes-tag"),
        (worker_requires, "worker-requires-tag"),
    )


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _tag_clauses(pair.category, pair.worker)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
