"""Fair share over time (issue 41): three submitters on one farm, submitting in the ratio
10:1:1, with equal shares, under today's order and under fair share.

Run from the repository root::

    .venv/bin/python bench/fairshare.py                        # SQLite, 10,000 dispatches
    .venv/bin/python bench/fairshare.py --database postgresql --dispatches 2000

It builds a scratch database (bench/_measure.py), registers ``--workers`` workers of one
slot each, and runs the farm in rounds: each round the jobs whose run is over finish
(a run lasts 1 to 3 rounds, drawn with a fixed seed, so that usage is booked every round)
and the free workers pull. Whenever a submitter has fewer waiting jobs than the farm has
workers, the three submit a batch in the ratio 10:1:1 (``--batch`` jobs of alice, a tenth
of that each of bob and carol): every submitter always has work waiting, and jobs arrive
in the ratio. The usage is real: the seconds between each job's pull and its finish, so
the half-life (``--halflife`` seconds, short) is in wall time.

It prints, per window of ``--window`` dispatches, each submitter's part of the dispatches
(share over time) and the load average; then, over the settled part (after the first
fifth of the dispatches), each one's part against its share (1/3 each) and how many rounds
bob's and carol's jobs waited. With today's order (priority, then age: the oldest first)
alice, who submits ten jobs of every twelve, takes 10/12 of the farm; with fair share each
takes a third. Not a test: it never gates CI.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import load_average, scratch_database

from app.db import migrate
from app.db.engine import Database
from app.db.models import Job, JobState
from app.matching import workers
from app.matching.dispatch import pull as dispatch
from app.matching.ordering import policy
from app.matching.submission import JobSpec
from app.matching.submission.bulk import BulkItem, submit_jobs
from app.matching.workers import WorkerSpec

SEED = 41
SUBMITTERS = {"alice": 10, "bob": 1, "carol": 1}


@dataclass
class Farm:
    """What the rounds keep: the running jobs and the round their run ends, the round each
    job was submitted in, and who got each dispatch, in order."""

    database: Database
    workers: list[str]
    rng: random.Random
    running: dict[str, tuple[int, int]] = field(default_factory=dict)
    submitted_round: dict[int, int] = field(default_factory=dict)
    dispatched: list[str] = field(default_factory=list)
    waits: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    round: int = 0

    def waiting(self) -> dict[str, int]:
        with self.database.transaction(write=False) as session:
            rows = session.execute(
                select(Job.submitter, func.count())
                .where(Job.state == JobState.WAITING)
                .group_by(Job.submitter)
            ).all()
        return {name: int(count) for name, count in rows}

    def top_up(self, batch: int) -> None:
        waiting = self.waiting()
        if all(waiting.get(name, 0) >= len(self.workers) for name in SUBMITTERS):
            return
        for name, weight in SUBMITTERS.items():
            count = max(1, batch * weight // 10)
            with self.database.transaction() as session:
                items = [BulkItem(JobSpec(resources=""))] * count
                done = submit_jobs(session, items, submitter=name, max_tasks=count)
            for job in done:
                self.submitted_round[job.id] = self.round

    def step(self) -> None:
        """One round: the runs that are over finish, then every free worker pulls."""
        self.round += 1
        for worker, (job_id, ends) in list(self.running.items()):
            if ends <= self.round:
                with self.database.transaction() as session:
                    dispatch.finish(session, job_id, worker, "finished")
                del self.running[worker]
        for worker in self.workers:
            if worker in self.running:
                continue
            with self.database.transaction() as session:
                job = dispatch.pull(session, worker)
                taken = None if job is None else (job.id, job.submitter)
            if taken is None:
                continue
            job_id, submitter = taken
            self.running[worker] = (job_id, self.round + self.rng.randint(1, 3))
            self.dispatched.append(submitter)
            self.waits[submitter].append(self.round - self.submitted_round[job_id])


def run(backend: str, ordering: policy.Ordering, args: argparse.Namespace) -> dict[str, float]:
    """Run the farm under ``ordering``; each submitter's part of the settled dispatches."""
    policy.use(ordering)
    print(f"\n=== {backend}, ordering {ordering.text()} ===  {load_average()}", flush=True)
    with scratch_database(backend, prefix="jobmatch_fairshare") as url:
        migrate.upgrade(url)
        database = Database(url)
        try:
            names = [f"w{index:02d}" for index in range(args.workers)]
            with database.transaction() as session:
                for name in names:
                    workers.upsert_worker(session, WorkerSpec(name=name, resources="", slots=1))
            farm = Farm(database, names, random.Random(SEED))
            started = time.perf_counter()
            printed = 0
            header = "  dispatches  " + "  ".join(f"{n:>6}" for n in SUBMITTERS)
            print(header + "   (part of the window's dispatches)", flush=True)
            while len(farm.dispatched) < args.dispatches:
                farm.top_up(args.batch)
                farm.step()
                while len(farm.dispatched) - printed >= args.window:
                    window = Counter(farm.dispatched[printed : printed + args.window])
                    printed += args.window
                    parts = "  ".join(f"{100 * window[n] / args.window:5.1f}%" for n in SUBMITTERS)
                    print(f"  {printed:>10,}  {parts}   round {farm.round}; {load_average()}")
            elapsed = time.perf_counter() - started
        finally:
            database.dispose()
    settled = farm.dispatched[args.dispatches // 5 : args.dispatches]
    counts = Counter(settled)
    parts = {name: counts[name] / len(settled) for name in SUBMITTERS}
    print(
        f"  settled ({len(settled):,} dispatches after the first {args.dispatches // 5:,}): "
        + ", ".join(f"{n} {100 * p:.1f}%" for n, p in parts.items())
        + f"; {farm.round} rounds in {elapsed:.0f} s; {load_average()}"
    )
    for name in ("bob", "carol"):
        waits = farm.waits[name][len(farm.waits[name]) // 5 :]
        if waits:
            print(
                f"  {name}'s jobs waited (settled): median {statistics.median(waits):.0f}, "
                f"max {max(waits)} rounds"
            )
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--dispatches", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=1_000, help="dispatches per line")
    parser.add_argument("--batch", type=int, default=100, help="alice's jobs per batch")
    parser.add_argument(
        "--halflife", type=float, default=5.0, help="fair share's half-life, seconds"
    )
    args = parser.parse_args()
    print(
        f"jobmatch fair-share bench: {args.workers} workers of 1 slot, submitters "
        f"{', '.join(f'{n} {w}' for n, w in SUBMITTERS.items())} (ratio), equal shares, "
        f"half-life {args.halflife:g} s, {args.dispatches:,} dispatches per policy; "
        f"{os.cpu_count()} CPUs"
    )
    off = run(args.database, policy.DEFAULT, args)
    on = run(args.database, policy.Ordering.of("fair-share,priority,age", args.halflife), args)
    policy.use(policy.DEFAULT)
    print("\nsettled part of the dispatches (share 33.3% each under fair share):")
    for name in SUBMITTERS:
        print(f"  {name:>6}: off {100 * off[name]:5.1f}%   on {100 * on[name]:5.1f}%")
    worst = max(abs(on[name] - 1 / 3) for name in SUBMITTERS)
    print(f"  fair share on: furthest from its share by {100 * worst:.1f} points; {load_average()}")


if __name__ == "__main__":
    main()
