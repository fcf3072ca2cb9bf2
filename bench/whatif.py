"""What-if over the live cluster (issue 24): how long a what-if takes, beside the real
operations it is made of, measured in the same run.

``python bench/whatif.py {sqlite,postgresql} [--workers N] [--categories N] [--jobs N]``
builds, in a scratch database, a cluster with bench/_data.py (Momotor tags of a teaching
and CI cluster: N workers, N categories by the real submission path, N waiting jobs) and
times, each as the median of ``--repeat`` runs:

* the what-if of a change set that drains 5 workers, adds 5 and submits 20 jobs;
* the yardstick: the same changes applied for real by the same services, then rolled back
  (what a what-if cannot do without), and one ``GET /v1/jobs/{id}/explain``-equivalent
  verdict of one waiting job (the what-if judges one job per category, twice).

The ratio what-if / (changes + 2 x categories x explain) says how much the what-if costs
above its parts. Figures are printed with the load average; not a test, it never gates CI.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, select

from app.db import migrate
from app.db.engine import Database
from app.db.models import Job, JobState
from app.matching.requests import JobSpec
from app.matching.whatif.changes import ChangeSet
from app.matching.whatif.run import apply_changes, what_if
from app.matching.whatif.runnable import category_runnable
from app.matching.workers import WorkerSpec
from bench._data import Dataset, build_categories, build_workers, grow_jobs
from bench.dispatch import analyze, load_average, scratch_database

SEED = 2424


def change_set(data: Dataset, rng: random.Random) -> ChangeSet:
    active = list(data.pullers)
    rng.shuffle(active)
    return ChangeSet(
        add_workers=tuple(
            WorkerSpec(f"whatif-{i}", "language: ?python, ?java; python: ?3.11; java: ?17", 4)
            for i in range(5)
        ),
        drain_workers=tuple(active[:5]),
        add_jobs=tuple(
            JobSpec(rng.choice(["language: python", "language: java; java: 17"])) for _ in range(20)
        ),
    )


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", choices=["sqlite", "postgresql"])
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--categories", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    rng = random.Random(SEED)
    with scratch_database(args.backend, keep=args.keep) as url:
        migrate.upgrade(url)
        database = Database(url)
        data = Dataset()
        build_workers(database, rng, args.workers, data, register_all=False)
        build_categories(database, rng, args.categories, data)
        grow_jobs(database, rng, args.jobs, data)
        analyze(database)
        changes = change_set(data, rng)
        with database.transaction(write=False) as session:
            waiting = session.scalar(
                select(func.count(Job.id)).where(Job.state == JobState.WAITING)
            )
            categories = session.scalar(
                select(func.count(func.distinct(Job.category_id))).where(
                    Job.state == JobState.WAITING
                )
            )
            one_job = session.scalar(select(Job).where(Job.state == JobState.WAITING).limit(1))
            assert one_job is not None
        whatif_s, applied_s, explain_s = [], [], []
        answer = None
        for _ in range(args.repeat):
            with database.transaction() as session:
                started = time.perf_counter()
                answer = what_if(session, changes, "first", by="bench")
                whatif_s.append(time.perf_counter() - started)
            with database.transaction() as session:
                savepoint = session.begin_nested()
                started = time.perf_counter()
                apply_changes(session, changes, "bench")
                applied_s.append(time.perf_counter() - started)
                savepoint.rollback()
            with database.transaction(write=False) as session:
                job = session.get(Job, one_job.id)
                assert job is not None
                started = time.perf_counter()
                category_runnable(session, job, "first")
                explain_s.append(time.perf_counter() - started)
        assert answer is not None
        yardstick = median_ms(applied_s) + 2 * int(categories or 0) * median_ms(explain_s)
        print(
            f"what-if on {args.backend}: {len(data.workers)} workers, {categories} categories "
            f"with {waiting} waiting jobs; change set: drain 5, add 5 workers, add 20 jobs"
        )
        print(
            f"  answer: {len(answer.runnable_now)} runnable now, "
            f"{len(answer.no_longer_runnable)} no longer runnable"
        )
        print(f"  what-if                      {median_ms(whatif_s):9.1f} ms (median)")
        print(f"  the changes alone, for real  {median_ms(applied_s):9.1f} ms")
        print(f"  one category's verdict       {median_ms(explain_s):9.1f} ms")
        print(
            f"  yardstick (changes + 2 x {categories} verdicts) {yardstick:9.1f} ms; "
            f"ratio what-if / yardstick {median_ms(whatif_s) / yardstick:.2f}"
        )
        print(f"  {load_average()} (cores: {os.cpu_count()})")
        database.dispose()


if __name__ == "__main__":
    main()
