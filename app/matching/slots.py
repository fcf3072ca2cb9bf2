"""Queue-instance slots: the room every job books, whatever its family.

Here for now: the slot clause of the misfit cache (a worker none of whose queue instances
has as many slots as the category asks for can never run its jobs).
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import func, select

from app.db.models import Category, QueueInstance, Worker
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause

REASONS = {"too-few-slots": "no queue instance of the worker has enough slots"}


@lru_cache(maxsize=8)
def _slot_clauses(category: type[Category], worker: type[Worker]) -> tuple[ReasonClause, ...]:
    """Built once per pair of entities: expressions are immutable."""
    largest_slots = (
        select(func.coalesce(func.max(QueueInstance.slots), 0))
        .where(QueueInstance.worker_id == worker.id)
        .scalar_subquery()
    )
    return ((largest_slots < category.slots, "too-few-slots"),)


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    return _slot_clauses(pair.category, pair.worker)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
