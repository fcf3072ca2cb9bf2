"""Which waiting jobs could be dispatched now: per category, as the explanation of a
waiting job decides it (app/matching/readiness.py: a pull by some worker, rehearsed and
rolled back, would start it were it that worker's best job; for a job on several nodes,
an allocation now would place it), so that a what-if and ``GET /v1/jobs/{id}/explain``
cannot disagree.

Every job of a category asks for the same things (the category is the canonical key of
the whole request, its slots included), so one job per category is judged; the cost is
O(categories with waiting jobs x workers), whatever the number of waiting jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Job, JobState
from app.matching.allocation.allocator import Policy
from app.matching.readiness import some_worker_can_run_now


@dataclass(frozen=True)
class CategoryNow:
    """One category with waiting jobs: their ids, and whether some worker could take one
    of them now."""

    category_id: int
    waiting: tuple[int, ...]
    runnable: bool


@dataclass(frozen=True)
class Snapshot:
    """Every category with waiting jobs, as of one moment of one transaction."""

    categories: dict[int, CategoryNow]

    def runnable_jobs(self) -> set[int]:
        """The ids of the waiting jobs some worker could take now."""
        return {
            job_id
            for category in self.categories.values()
            if category.runnable
            for job_id in category.waiting
        }


def _waiting_by_category(session: Session) -> dict[int, list[int]]:
    rows = session.execute(
        select(Job.category_id, Job.id).where(Job.state == JobState.WAITING).order_by(Job.id)
    )
    found: dict[int, list[int]] = {}
    for category_id, job_id in rows:
        found.setdefault(category_id, []).append(job_id)
    return found


def category_runnable(session: Session, job: Job, policy: Policy) -> bool:
    """Whether some worker could take the waiting ``job`` now (and so any job of its
    category): the explanation's answer ``now`` or ``outranked`` for some worker."""
    return some_worker_can_run_now(session, job, policy)


def snapshot(session: Session, policy: Policy) -> Snapshot:
    """The waiting jobs of every category, and which categories some worker could serve
    now."""
    categories: dict[int, CategoryNow] = {}
    for category_id, job_ids in _waiting_by_category(session).items():
        job = session.get(Job, job_ids[0])
        assert job is not None
        categories[category_id] = CategoryNow(
            category_id, tuple(job_ids), category_runnable(session, job, policy)
        )
    return Snapshot(categories)
