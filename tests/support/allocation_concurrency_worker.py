"""The scheduler side of the allocation concurrency test: a loop that allocates waiting
multi-node jobs with POST /v1/jobs/{id}/allocate's service (scheduling.schedule_job),
while executors (tests/support/concurrency_worker.py) pull single-node jobs on the same
workers. A placed job reaches its first node as agents receive it (issue 22): the
executor pulling for that worker gets it delivered, holds it and finishes it.

Like the executors, it runs in a thread (SQLite) or a spawned process (PostgreSQL), never
asserts, and reports through a picklable dataclass.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import CategoryShape, Job, JobState, Worker
from app.matching.allocation import allocate as scheduling
from app.matching.allocation.allocator import POLICIES
from app.matching.errors import ConflictError
from tests.support.concurrency_worker import MAX_KEPT_ERRORS, Flag, _Deadline, _transact
from tests.support.concurrency_worker import Report as _ExecutorReport


@dataclass(frozen=True)
class SchedulerPlan:
    seed: int
    run_seconds: float
    #: Pause after a round that placed nothing.
    idle_pause: tuple[float, float] = (0.002, 0.008)


@dataclass(frozen=True)
class Placed:
    job_id: int
    leader: str
    policy: str
    at: float


@dataclass
class SchedulerReport:
    placed: list[Placed] = field(default_factory=list)
    #: Attempts that found no room now, or lost a vertex to a concurrent pull (retried).
    conflicts: int = 0
    busy_retries: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    timed_out: bool = False
    still_held: list[int] = field(default_factory=list)

    def error(self, where: str, exc: BaseException) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_KEPT_ERRORS:
            self.errors.append(f"scheduler {where}: {type(exc).__name__}: {exc}")


def _waiting_multi_node(session: Session) -> list[int]:
    return list(
        session.scalars(
            select(Job.id)
            .join(CategoryShape, CategoryShape.category_id == Job.category_id)
            .where(Job.state == JobState.WAITING, CategoryShape.min_nodes > 1)
            .order_by(Job.priority.desc(), Job.id)
            .limit(8)
        )
    )


def _schedule(session: Session, job_id: int, policy: Any) -> tuple[int, str]:
    job = scheduling.schedule_job(session, job_id, policy)
    leader = session.scalar(select(Worker.name).where(Worker.id == job.worker_id))
    assert leader is not None
    return job.id, leader


def run_scheduler(
    database: Database, plan: SchedulerPlan, go: Flag, submitted: Flag
) -> SchedulerReport:
    report = SchedulerReport()
    # _transact counts busy retries on an executor report; keep one for it.
    busy = _ExecutorReport("scheduler")
    rng = random.Random(plan.seed)
    go.wait()
    deadline = time.time() + plan.run_seconds
    try:
        while True:
            if time.time() > deadline or report.error_count > 100:
                report.timed_out = time.time() > deadline
                break
            waiting = _transact(database, _waiting_multi_node, busy, deadline)
            if not waiting:
                if submitted.is_set():
                    break
                time.sleep(rng.uniform(*plan.idle_pause))
                continue
            job_id = rng.choice(waiting)
            policy = rng.choice(POLICIES)
            try:
                placed = _transact(
                    database, lambda s, j=job_id, p=policy: _schedule(s, j, p), busy, deadline
                )
            except _Deadline:
                continue
            except ConflictError:
                report.conflicts += 1
                time.sleep(rng.uniform(*plan.idle_pause))
                continue
            except Exception as exc:
                report.error(f"allocate job {job_id}", exc)
                time.sleep(0.005)
                continue
            report.placed.append(Placed(placed[0], placed[1], policy, time.time()))
    except Exception as exc:  # never let the scheduler die silently
        report.error("loop", exc)
    report.busy_retries = busy.busy_retries
    return report


def scheduler_process_main(
    url: str, plan: SchedulerPlan, go: Flag, submitted: Flag, results: Any
) -> None:
    """Entry point of a spawned process; reports ("ready", name) then ("scheduler", report)."""
    report = SchedulerReport()
    try:
        database = Database(url, busy_timeout=5.0)
        try:
            database.ping()
            results.put(("ready", "scheduler"))
            report = run_scheduler(database, plan, go, submitted)
        finally:
            database.dispose()
    except BaseException as exc:
        report.error("process", exc)
        results.put(("ready", "scheduler"))
    results.put(("scheduler", report))
