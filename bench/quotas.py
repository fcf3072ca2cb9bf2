"""Resource quota sets at dispatch (issue 24): what enabled sets cost a scheduling run and a
pull, against the same run and pulls without them, measured in the same process.

``python bench/quotas.py URL [--hosts N] [--users N] [--jobs N] [--pulls N]`` builds, in an
empty migrated database at URL, N hosts with one 4-slot queue instance each and waiting
Grid Engine jobs (``-l h_rt=60``) of several owners, then times, each in a transaction
that is rolled back so every measurement starts from the same state:

* one scheduling run and ``--pulls`` pulls with no quota set (the yardstick);
* the same with three enabled sets: 10 slots per user (``users {*}``), 3 per host
  (``hosts {*}``) and a cluster total (``to slots=N``).

It prints the times, their ratio to the yardstick and the load average before and after.
Not a test: it never gates CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from app.db import dialect, migrate
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Job, JobState, Worker
from app.matching.dispatch import pull as dispatch
from app.matching.gridengine.quota_sets import create_quota_set
from app.matching.gridengine.run import schedule
from app.matching.submission import JobSpec, submit_job
from app.matching.workers import QueueSpec, WorkerSpec, upsert_worker


def build(database: Database, hosts: int, users: int, jobs: int) -> None:
    """The cluster, one job per owner through the engine, the rest bulk-inserted."""
    with database.transaction() as session:
        for index in range(hosts):
            upsert_worker(
                session, WorkerSpec(name=f"h{index:04d}", queues=(QueueSpec("all.q", 4),))
            )
        first = [
            submit_job(session, JobSpec(hard="h_rt=60"), submitter=f"u{user:03d}")
            for user in range(users)
        ]
        template = first[0]
        now = utcnow()
        session.execute(
            insert(Job),
            [
                {
                    "state": JobState.WAITING,
                    "category_id": template.category_id,
                    "hard": template.hard,
                    "submitter": f"u{index % users:03d}",
                    "submitted_at": now,
                }
                for index in range(jobs - users)
            ],
        )


@contextmanager
def rolled_back(database: Database) -> Iterator[Session]:
    """A writing transaction that is always rolled back."""
    session = Session(database.engine)
    try:
        session.connection(execution_options={dialect.WRITE_OPTION: True})
        yield session
    finally:
        session.rollback()
        session.close()


def measure(database: Database, names: list[str]) -> tuple[float, int, list[float]]:
    with rolled_back(database) as session:
        started = time.perf_counter()
        report = schedule(session)
        run = time.perf_counter() - started
    timings = []
    for name in names:
        with rolled_back(database) as session:
            t0 = time.perf_counter()
            dispatch.pull(session, name)
            timings.append((time.perf_counter() - t0) * 1000)
    return run, report.dispatched, sorted(timings)


def _p(timings: list[float], q: float) -> float:
    return timings[max(0, int(len(timings) * q) - 1)]


def report(label: str, measured: tuple[float, int, list[float]]) -> None:
    run, dispatched, timings = measured
    print(
        f"{label}: run {run:.2f} s ({dispatched} dispatched), pull p50 "
        f"{statistics.median(timings):.2f} ms p95 {_p(timings, 0.95):.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--users", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--pulls", type=int, default=100)
    args = parser.parse_args()
    print("load average at the start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    migrate.upgrade(args.url)
    database = Database(args.url)
    build(database, args.hosts, args.users, args.jobs)
    with database.transaction() as session:
        names = list(session.scalars(select(Worker.name).order_by(Worker.name)))[: args.pulls]
    bare = measure(database, names)
    report("no quota set    ", bare)
    with database.transaction() as session:
        create_quota_set(session, "name per_user\nenabled TRUE\nlimit users {*} to slots=10\n")
        create_quota_set(session, "name per_host\nenabled TRUE\nlimit hosts {*} to slots=3\n")
        total = args.hosts * 2
        create_quota_set(session, f"name total\nenabled TRUE\nlimit to slots={total}\n")
    quotas = measure(database, names)
    report("three quota sets", quotas)
    print(
        f"ratio to the yardstick: run {quotas[0] / bare[0]:.2f}x, pull p50 "
        f"{statistics.median(quotas[2]) / statistics.median(bare[2]):.2f}x"
    )
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    database.dispose()


if __name__ == "__main__":
    main()
