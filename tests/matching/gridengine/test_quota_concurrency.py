"""Concurrent pulls never overbook a resource quota (issue 24): eight workers pull at once,
each on its own connection, against sets that all of them share; on PostgreSQL the pulls
really meet at the quota rows' guarded UPDATEs (READ COMMITTED re-checks the guard on the
row's latest version), on SQLite at BEGIN IMMEDIATE. Afterwards exactly the limit runs, the
books equal the running jobs' bookings, and finishing everything gives them all back."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from app.db.engine import Database
from app.db.models import Job, JobState, QuotaBooking, QuotaUsage
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from app.matching.gridengine.quota_sets import create_quota_set
from app.matching.submission import JobSpec, submit_job
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec

pytestmark = pytest.mark.db

WORKERS = [f"w{i}" for i in range(8)]
USERS = ("alice", "bob", "carol")
# sge_resource_quota(5): every enabled set applies; 7 slots for all together, 3 per user.
SETS = (
    "name together\nenabled TRUE\nlimit to slots=7\n",
    "name per_user\nenabled TRUE\nlimit users {*} to slots=3\n",
)


def _pull_until_empty(database: Database, worker: str, start: threading.Barrier) -> list[int]:
    taken: list[int] = []
    start.wait()
    misses = 0
    while misses < 3:
        try:
            with database.transaction() as session:
                job = dispatch.pull(session, worker)
                job_id = None if job is None else job.id
        except (ConflictError, OperationalError):
            continue  # lost a race (deadlock or busy database): pull again
        if job_id is None:
            misses += 1
        else:
            taken.append(job_id)
    return taken


def test_concurrent_pulls_hold_every_set(database: Database) -> None:
    with database.transaction() as session:
        for name in WORKERS:
            upsert_worker(session, WorkerSpec(name=name, queues=(QueueSpec("all.q", 4),)))
        for text in SETS:
            create_quota_set(session, text)
        for index in range(30):
            submit_job(session, JobSpec(hard="h_rt=60"), submitter=USERS[index % 3])
    start = threading.Barrier(len(WORKERS))
    results: dict[str, list[int]] = {}

    def run(worker: str) -> None:
        results[worker] = _pull_until_empty(database, worker, start)

    threads = [threading.Thread(target=run, args=(w,)) for w in WORKERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    taken = [job_id for jobs in results.values() for job_id in jobs]
    assert len(taken) == len(set(taken)) == 7
    with database.transaction() as session:
        running = session.execute(
            select(Job.submitter, func.count())
            .where(Job.state == JobState.RUNNING)
            .group_by(Job.submitter)
        ).all()
        per_user = Counter({user: count for user, count in running})
        assert sum(per_user.values()) == 7 and max(per_user.values()) <= 3
        usage = {
            key: used for key, used in session.execute(select(QuotaUsage.key, QuotaUsage.used))
        }
        assert usage["/////"] == 7.0
        assert {k: v for k, v in usage.items() if k != "/////"} == {
            f"{user}/////": float(count) for user, count in per_user.items()
        }
        booked = session.scalar(select(func.sum(QuotaBooking.amount)))
        assert booked == 14.0  # each running job holds one slot of each set
    for worker, jobs in results.items():
        for job_id in jobs:
            with database.transaction() as session:
                dispatch.finish(session, job_id, worker, outcome="finished")
    with database.transaction() as session:
        assert set(session.scalars(select(QuotaUsage.used))) == {0.0}
        assert session.scalars(select(QuotaBooking)).all() == []
