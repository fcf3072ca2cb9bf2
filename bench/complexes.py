"""Grid Engine complexes at scale (issue 6): a scheduling run over every waiting job, and
single pulls.

``python bench/complexes.py [--database postgresql|sqlite] [--hosts N] [--jobs N]
[--categories N]`` creates a scratch database of its own (PostgreSQL on
JOBMATCH_BENCH_POSTGRES_URL, JOBMATCH_TEST_POSTGRES_URL or 127.0.0.1:5432 as postgres;
SQLite under /tmp), dropped at the end even when the run fails (``--keep`` keeps it),
migrates it and builds a cluster of N hosts with one queue instance each and 20
attributes with values at the global, host and queue-instance level (numbers with several
relops, strings, a per-slot memory consumable), then submits one job per category through
the engine (categories, request rows and the SQL misfit cache) and bulk-inserts the other
waiting jobs of those categories. It times the category creation, one ``POST
/v1/schedule``-equivalent run, and pulls (p50/p95) of workers on a fresh cluster state.
Every figure is printed with the load average beside it. Issue targets on PostgreSQL: the
whole run under 60 s, a pull p50 under 10 ms. The random seed is fixed. Not a test: it
never gates CI.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import load_average, scratch_database
from sqlalchemy import insert, select, text, update

from app.db import migrate
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import (
    Attribute,
    AttributeValue,
    ConsumableUsage,
    Job,
    JobState,
    Queue,
    QueueInstance,
    Worker,
)
from app.matching.dispatch import pull as dispatch
from app.matching.gridengine.run import schedule
from app.matching.gridengine.table import create_attribute, definition_from_body, load_table
from app.matching.gridengine.values import _row, write_queue_builtins
from app.matching.requests import JobSpec
from app.matching.submission import submit_job

SEED = 6062

#: 20 attributes: (name, type, relop, consumable)
ATTRIBUTES = [
    *((f"n{i}", "INT", "<=", "NO") for i in range(8)),
    *((f"d{i}", "DOUBLE", ">=", "NO") for i in range(4)),
    *((f"s{i}", "STRING", "==", "NO") for i in range(6)),
    ("m0", "MEMORY", "<=", "NO"),
    ("mem_c", "MEMORY", "<=", "YES"),
]
STRINGS = ["alpha", "beta", "gamma", "delta"]


def _value(rng: random.Random, kind: str) -> str:
    if kind == "INT":
        return str(rng.randint(10, 100))
    if kind == "DOUBLE":
        return f"{rng.uniform(0, 1):.2f}"
    if kind == "STRING":
        return rng.choice(STRINGS)
    return f"{rng.randint(8, 64)}G"


def _analyze(database: Database) -> None:
    """Planner statistics after the bulk loads, as autovacuum (or SQLite's optimizer
    pragma) would have them on a cluster that has been running: without them PostgreSQL
    plans every table as a few rows."""
    with database.engine.connect() as connection:
        connection.execute(text("ANALYZE"))
        connection.commit()


def build(database: Database, hosts: int, categories: int, jobs: int) -> float:
    rng = random.Random(SEED)
    with database.transaction() as session:
        for name, kind, relop, consumable in ATTRIBUTES:
            create_attribute(
                session,
                definition_from_body(
                    {
                        "name": name,
                        "shortcut": name,
                        "type": kind,
                        "relop": relop,
                        "requestable": "YES",
                        "consumable": consumable,
                        "default": "NONE" if kind == "STRING" else "0",
                        "urgency": 0,
                    }
                ),
            )
        table = load_table(session)
        ids = dict(session.execute(select(Attribute.name, Attribute.id)).all())
        queue = Queue(name="all.q", seq_no=0)
        session.add(queue)
        session.flush()
        session.execute(
            insert(Worker),
            [{"name": f"h{i:05d}", "generation": 1, "resources": ""} for i in range(hosts)],
        )
        workers = session.scalars(select(Worker).order_by(Worker.id)).all()
        session.execute(
            insert(QueueInstance),
            [
                {"queue_id": queue.id, "worker_id": w.id, "slots": 8, "used_slots": 0}
                for w in workers
            ],
        )
        session.flush()
        session.expire_all()
        rows = []
        usage = []
        from app.matching.gridengine.values import Target

        targets = [Target("global")]
        for worker in session.scalars(select(Worker).order_by(Worker.id)):
            write_queue_builtins(session, worker)
            targets.append(Target("host", worker.id))
            for qi in worker.queue_instances:
                targets.append(Target("queue_instance", worker.id, qi.id))
        for target in targets:
            for name, kind, _relop, consumable in ATTRIBUTES:
                if target.level == "global" and consumable == "YES":
                    continue
                text = _value(rng, kind)
                if consumable == "YES":
                    text = f"{rng.randint(16, 64)}G"
                rows.append(_row(table[name], ids[name], target, "fixed", text))
                if consumable == "YES":
                    usage.append(
                        {
                            "attribute_id": ids[name],
                            "level": target.level,
                            "object_key": target.object_key,
                            "worker_id": target.worker_id,
                            "queue_instance_id": target.queue_instance_id,
                            "capacity": float(rows[-1]["number"]),  # type: ignore[arg-type]
                            "used": 0.0,
                            "used_nonexclusive": 0.0,
                        }
                    )
        for start in range(0, len(rows), 20_000):
            session.execute(insert(AttributeValue), rows[start : start + 20_000])
        session.execute(insert(ConsumableUsage), usage)
    print(f"cluster: {hosts} hosts, {len(rows)} attribute values, {len(usage)} capacities")
    _analyze(database)
    started = time.perf_counter()
    category_jobs: list[int] = []
    with database.transaction() as session:
        for _ in range(categories):
            names = rng.sample(ATTRIBUTES, rng.randint(3, 6))
            items = []
            for name, kind, _relop, _consumable in names:
                if kind == "INT":
                    items.append(f"{name}={rng.randint(1, 40)}")
                elif kind == "DOUBLE":
                    items.append(f"{name}={rng.uniform(0.5, 1):.2f}")
                elif kind == "STRING":
                    items.append(f"{name}={rng.choice(['alpha', 'beta|gamma', '*a'])}")
                else:
                    items.append(f"{name}={rng.randint(1, 4)}G")
            job = submit_job(session, JobSpec(hard=",".join(items)), submitter="bench")
            category_jobs.append(job.category_id)
    categorise = time.perf_counter() - started
    print(
        f"categories: {categories} created with their misfit cache in {categorise:.1f} s "
        f"({1000 * categorise / max(1, categories):.0f} ms each at {hosts} hosts); "
        f"{load_average()}"
    )
    with database.transaction() as session:
        now = utcnow()
        extra = [
            {
                "category_id": category_jobs[i % categories],
                "state": JobState.WAITING,
                "priority": rng.randint(0, 3),
                "slots": 1,
                "resources": "",
                "submitter": "bench",
                "submitted_at": now,
            }
            for i in range(jobs - categories)
        ]
        for start in range(0, len(extra), 20_000):
            session.execute(insert(Job), extra[start : start + 20_000])
    _analyze(database)
    return categorise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database",
        choices=("postgresql", "sqlite"),
        default="postgresql",
        help="the backend of the scratch database (default postgresql)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--hosts", type=int, default=5000, help="hosts (default 5,000)")
    parser.add_argument("--jobs", type=int, default=100_000, help="waiting jobs (default 100,000)")
    parser.add_argument(
        "--categories", type=int, default=1000, help="categories, one job each (default 1,000)"
    )
    parser.add_argument("--pulls", type=int, default=200, help="timed pulls (default 200)")
    args = parser.parse_args()
    with scratch_database(args.database, keep=args.keep, prefix="jobmatch_complexes") as url:
        migrate.upgrade(url)
        database = Database(url)
        try:
            run(database, args.hosts, args.categories, args.jobs, args.pulls)
        finally:
            database.dispose()


def run(database: Database, hosts: int, categories: int, jobs: int, pulls: int) -> None:
    """Build the cluster, then time one scheduling run and single pulls."""
    build(database, hosts, categories, jobs)
    if database.dialect_name == "postgresql":
        # Fresh statistics and visibility after the bulk load, as autovacuum would give
        # (bench/dispatch.py does the same); without it the misfit lookups read the heap.
        with database.engine.connect().execution_options(
            isolation_level="AUTOCOMMIT"
        ) as connection:
            connection.exec_driver_sql("VACUUM ANALYZE")
    started = time.perf_counter()
    with database.transaction() as session:
        report = schedule(session)
    elapsed = time.perf_counter() - started
    print(
        f"scheduling run: {report.considered} jobs considered, {report.dispatched} dispatched, "
        f"{report.rejected_categories} categories rejected, {elapsed:.1f} s; {load_average()}"
    )
    with database.transaction() as session:
        # Free the cluster again so that pulls have work to find.
        session.execute(update(Job).where(Job.state == JobState.RUNNING).values(state="waiting"))
        session.execute(update(QueueInstance).values(used_slots=0))
        session.execute(update(ConsumableUsage).values(used=0.0))
        from app.db.models import Allocation, JobBooking

        session.query(JobBooking).delete()
        session.query(Allocation).delete()
    names = [f"h{i:05d}" for i in random.Random(SEED).sample(range(hosts), pulls)]
    timings = []
    got = 0
    for name in names:
        t0 = time.perf_counter()
        with database.transaction() as session:
            got += dispatch.pull(session, name) is not None
        timings.append((time.perf_counter() - t0) * 1000)
    timings.sort()
    print(
        f"pull: {len(timings)} pulls ({got} got a job), p50 {statistics.median(timings):.1f} ms, "
        f"p95 {timings[int(len(timings) * 0.95) - 1]:.1f} ms (committed); {load_average()}"
    )


if __name__ == "__main__":
    main()
