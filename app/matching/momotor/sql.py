"""Momotor's NoMatch cells as SQL: EXISTS / NOT EXISTS over the tag rows of the two sides
(Momotor's match table; the reason codes are listed in app/matching/misfits.py).

The parser rejects one tag in two modes within a group, so each (group, value) has at most
one mode per side and these four clauses are exactly Momotor's NoMatch cases.

The two "excluded" clauses are sets of (category, worker) pairs narrowed to the
statement's scope (one new category, or one changed worker; app/matching/gridengine/sql.py
``Scope``), which the database builds once per statement and probes per pair, as the Grid
Engine clauses are. Written as EXISTS correlated to both sides, PostgreSQL turned them into
sets over every category and every worker tag for each new category (a 143,000-row join at
500 categories; issue 23). "The job requires a tag" is, for a new category, a counted
set too (the workers offering as many of its required tags as it has,
``_lacking_a_required_tag``). It needs ``ix_worker_tags_tag`` to find the workers naming
a tag: without it an earlier counted form took SQLite 20 s at 10,000 workers; with it a
whole new category takes SQLite 131 ms there. For a changed worker, and for "the worker requires a
tag" in both scopes, the clause stays correlated: one index probe per required tag.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from sqlalchemy import (
    ColumnElement,
    Select,
    SQLColumnExpression,
    and_,
    exists,
    func,
    literal_column,
    select,
    tuple_,
)
from sqlalchemy.orm import aliased

from app.db.models import Category, CategoryTag, TagMode, Worker, WorkerTag
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause, scope_id

_OFFERED = (TagMode.REQUIRED, TagMode.OPTIONAL)
_ONE: ColumnElement[int] = literal_column("1")

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
        # OFFSET 0 keeps PostgreSQL from turning the NOT EXISTS into an anti join, for which
        # it hashed the other side's tags once per pair (measured on "job requires a tag"
        # for a new category: 11 us a worker, 110 ms of 150 at 10,000 workers, before that
        # scope got its counted set); as a subplan it is one index probe per required tag
        # (issue 23). A LIMIT would not do: the planner drops it from EXISTS.
        ~select(_ONE)
        .where(offering.owned, same_tag, offering.mode.in_(_OFFERED))
        .offset(0)
        .correlate_except(offering.table)
        .exists(),
    )


def _narrowed(
    kind: str, category_tag: type[CategoryTag], worker_tag: type[WorkerTag]
) -> ColumnElement[bool]:
    """Tag rows of the scope's one category, or of its one worker."""
    if kind == "category":
        return category_tag.category_id == scope_id()
    return worker_tag.worker_id == scope_id()


def _named_by_both(
    kind: str, job_modes: tuple[TagMode, ...], worker_modes: tuple[TagMode, ...]
) -> Select[int, int]:
    """(category, worker) pairs in the scope that name one tag, the job in one of
    ``job_modes`` and the worker in one of ``worker_modes``, as a set."""
    ct, wt = aliased(CategoryTag), aliased(WorkerTag)
    return select(ct.category_id, wt.worker_id).where(
        _tag_pair(ct, wt),
        ct.mode.in_(job_modes),
        wt.mode.in_(worker_modes),
        _narrowed(kind, ct, wt),
    )


def _lacking_a_required_tag(worker: type[Worker]) -> ColumnElement[bool]:
    """For a new category's scope: the category requires tags and the worker is not among
    those offering all of them, counted once for the statement (an index probe per
    required tag on ``ix_worker_tags_tag``) instead of probed per worker, which cost
    4 us a worker at 10,000 workers (issue 23). The parser keeps one mode per tag and
    side, so a worker offering every required tag has exactly as many matching rows."""
    required, ct, wt = aliased(CategoryTag), aliased(CategoryTag), aliased(WorkerTag)
    required_count = (
        select(func.count())
        .select_from(required)
        .where(required.category_id == scope_id(), required.mode == TagMode.REQUIRED)
        .scalar_subquery()
    )
    offering_all = (
        select(wt.worker_id)
        .join(ct, _tag_pair(ct, wt))
        .where(
            ct.category_id == scope_id(),
            ct.mode == TagMode.REQUIRED,
            wt.mode.in_(_OFFERED),
        )
        .group_by(wt.worker_id)
        .having(func.count() == required_count)
    )
    return and_(required_count > 0, worker.id.not_in(offering_all))


@lru_cache(maxsize=8)
def _tag_clauses(
    category: type[Category], worker: type[Worker], kind: str
) -> tuple[ReasonClause, ...]:
    """The four tag clauses for a scope kind. Expressions are immutable, so they are built
    once: aliasing the models costs tens of ms a time."""
    pair = tuple_(category.id, worker.id)
    if kind == "category":
        job_requires = _lacking_a_required_tag(worker)
    else:
        job_tags, worker_tags, same_tag = _both_sides(category, worker)
        job_requires = _required_not_offered(job_tags, worker_tags, same_tag)
    job_tags, worker_tags, same_tag = _both_sides(category, worker)
    worker_requires = _required_not_offered(worker_tags, job_tags, same_tag)
    return (
        (job_requires, "job-requires-tag"),
        (pair.in_(_named_by_both(kind, _OFFERED, (TagMode.EXCLUDED,))), "worker-excludes-tag"),
        (pair.in_(_named_by_both(kind, (TagMode.EXCLUDED,), _OFFERED)), "job-excludes-tag"),
        (worker_requires, "worker-requires-tag"),
    )


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _tag_clauses(pair.category, pair.worker, pair.scope_kind)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
