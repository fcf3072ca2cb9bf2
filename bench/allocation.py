"""Allocation at cluster scale (issue 9): 4,096 nodes of 2 sockets x 16 cores x 2 GPUs,
10,000 jobs of mixed shapes (single-node and multi-node, cores and GPUs) allocated through
the scheduler path (scheduling.schedule_job, as POST /v1/jobs/{id}/allocate) and freed.

Run ``python bench/allocation.py [--backend sqlite|postgresql] [--nodes N] [--jobs N]``
from the repository root; PostgreSQL uses JOBMATCH_BENCH_POSTGRES_URL or
JOBMATCH_TEST_POSTGRES_URL and works in a database of its own that it drops afterwards.
It prints the median and 95th percentile of one allocation (one transaction of
``schedule_job`` as the endpoint runs it before it renders its answer: the job's read, SQL
filter, allocator walk, locks, booking and commit) and of the match within it (filter and
walk, what Fluxion's figure covers), its median CPU time in this process
(SQLite's work included; a steadier guide than wall time on a shared machine), the CPU
per job of the whole loop in this process and, on PostgreSQL, in the database's backend
processes (read from /proc: the server runs on this machine), the SQL
statements per allocation and per release, the median of one release, and the jobs
allocated and freed per second.
Fluxion's reference: about 22 ms per match at 256 nodes x 32 cores (flux-sched issue #448).

The nodes are registered in bulk: one node through ``upsert_worker``, then its rows copied
for the others (4,096 upserts one by one take minutes on SQLite). A sample of the copied
nodes is checked against ``upsert_worker``: each is deleted and registered again in a
savepoint, and its rows must come out identical. Before the timed loop the process sets
its heap aside from the garbage collector (app.heap.settle), as a serving process does.
Not a test: pytest does not collect it, and it never gates CI.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CpuSample, load_average
from sqlalchemy import Table, delete, event, func, insert, select

from app import heap
from app.db import migrate
from app.db.engine import Database
from app.db.models import (
    Category,
    InventoryCount,
    InventoryVertex,
    QueueInstance,
    Worker,
    WorkerInventory,
    WorkerNamePart,
    WorkerProperty,
    WorkerTag,
)
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from app.matching.flux.sql import store_worker_name_parts
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.databases import fresh_database

SEED = 20261121
NODE = "node/socket=2/[core=16;gpu=2]"
#: (shape, weight): single-node jobs of cores, GPUs, sockets and whole nodes, and
#: multi-node jobs of partial and whole nodes.
SHAPES = (
    ("slot/core=4", 30),
    ("slot/[core=8;gpu=1]", 20),
    ("slot/socket", 10),
    ("slot/[core=16;gpu=2]", 8),
    ("slot/node", 10),
    ("node=2/slot/[core=4;gpu=1]", 10),
    ("slot=4/node", 7),
    ("node=16/slot/core=8", 5),
)
#: Jobs kept running at once per node (the oldest is freed when more run): about 60% of
#: the cores, so allocations meet partly used nodes and fragmentation.
WINDOW_PER_NODE = 0.75
#: Bulk-registered nodes checked against upsert_worker.
SAMPLE = 3
#: Worker-keyed tables copied from the template node, and compared for the sample.
COPIED: tuple[Any, ...] = (
    QueueInstance,
    WorkerTag,
    WorkerProperty,
    InventoryVertex,
    InventoryCount,
    WorkerInventory,
)
NOT_COMPARED = {"id", "worker_id", "created_at", "updated_at", "last_seen"}


def _spec(index: int) -> WorkerSpec:
    return WorkerSpec(name=f"n{index}", rank=index, slots=64, inventory=NODE)


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


def register_bulk(database: Database, nodes: int) -> None:
    """Node 0 through upsert_worker; the others as copies of its rows."""
    with database.transaction() as session:
        assert not session.scalar(select(func.count()).select_from(Category)), "no categories"
        template, _ = workers.upsert_worker(session, _spec(0))
        columns = {
            c.name: getattr(template, c.key)
            for c in Worker.__table__.columns
            if c.name not in NOT_COMPARED and c.name not in ("name", "rank")
        }
        copied = {
            model: [
                {k: v for k, v in row._mapping.items() if k not in ("id", "worker_id")}
                for row in session.execute(
                    select(_table(model)).where(_table(model).c.worker_id == template.id)
                )
            ]
            for model in COPIED
        }
    for start in range(1, nodes, 512):
        indexes = range(start, min(nodes, start + 512))
        with database.transaction() as session:
            session.execute(
                insert(Worker), [{**columns, "name": f"n{i}", "rank": i} for i in indexes]
            )
            ids = dict(
                session.execute(
                    select(Worker.name, Worker.id).where(
                        Worker.name.in_([f"n{i}" for i in indexes])
                    )
                ).all()
            )
            for model, rows in copied.items():
                if rows:
                    session.execute(
                        insert(model),
                        [
                            # Inventory rows carry a copy of the worker's rank (0012).
                            {**row, "worker_id": ids[f"n{i}"]}
                            | ({"rank": i} if "rank" in row else {})
                            for i in indexes
                            for row in rows
                        ],
                    )
            for i in indexes:
                store_worker_name_parts(session, ids[f"n{i}"], f"n{i}")


def _rows(session: Any, worker_id: int) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for model in (Worker, WorkerNamePart, *COPIED):
        table = _table(model)
        key = table.c.id if model is Worker else table.c.worker_id
        names = sorted(c.name for c in table.columns if c.name not in NOT_COMPARED)
        out[table.name] = sorted(
            tuple(str(row._mapping[n]) for n in names)
            for row in session.execute(select(table).where(key == worker_id))
        )
    return out


def check_sample(database: Database, nodes: int, rng: random.Random) -> list[int]:
    """Copied nodes equal what upsert_worker makes of the same spec (then rolled back)."""
    sample = sorted(rng.sample(range(1, nodes), min(SAMPLE, nodes - 1)))
    with database.transaction() as session:
        for index in sample:
            worker_id = session.scalar(select(Worker.id).where(Worker.name == f"n{index}"))
            assert worker_id is not None
            copied = _rows(session, worker_id)
            savepoint = session.begin_nested()
            session.execute(delete(Worker).where(Worker.id == worker_id))
            fresh, created = workers.upsert_worker(session, _spec(index))
            assert created
            made = _rows(session, fresh.id)
            savepoint.rollback()
            assert copied == made, f"node n{index}: bulk rows differ from upsert_worker's"
    return sample


def _analyze(database: Database) -> None:
    """PostgreSQL: statistics as autovacuum keeps them (the bench's server may run
    without it). Stale ones hurt more than the survivors plan: the foreign-key checks
    against ``jobs`` keep the sequential scan planned while the table was empty."""
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("ANALYZE")


def run(
    database: Database, nodes: int, jobs: int, policy: str, analyze_every: int = 0
) -> dict[str, float]:
    rng = random.Random(SEED)
    began = time.perf_counter()
    register_bulk(database, nodes)
    if database.dialect_name == "postgresql":
        # Statistics and visibility after the bulk load, as autovacuum would give (the
        # other benches do the same); without them the survivors query plan is blind.
        with database.engine.connect().execution_options(
            isolation_level="AUTOCOMMIT"
        ) as connection:
            connection.exec_driver_sql("VACUUM ANALYZE")
    registered = time.perf_counter() - began
    sample = check_sample(database, nodes, rng)
    # The bench frees each job as its leader; the names are read once here, so that the
    # timed transaction holds the allocation only (it used to read the leader's name too,
    # one more round trip in every timed figure before 2026-11-22).
    with database.transaction(write=False) as session:
        names = dict(session.execute(select(Worker.id, Worker.name)).all())
    # As the serving process does once it is ready (app.api.app.create_app_from_environment).
    heap.settle()
    shapes = [s for s, _ in SHAPES]
    weights = [w for _, w in SHAPES]
    running: deque[tuple[int, str]] = deque()
    allocate_ms: list[float] = []
    allocate_cpu_ms: list[float] = []
    free_ms: list[float] = []
    unplaced = 0
    statements = _Statements(database)
    matching = _MatchTimer()
    cpu_before = CpuSample.now(database.url)
    for index in range(jobs):
        if analyze_every and index % analyze_every == 0 and database.dialect_name == "postgresql":
            _analyze(database)  # not timed
        with database.transaction() as session:
            job_id = submission.submit_job(
                session, JobSpec(shape=rng.choices(shapes, weights)[0]), submitter="bench"
            ).id
        statements.start("allocate")
        start, cpu = time.perf_counter(), time.process_time()
        try:
            with database.transaction() as session:
                job = scheduling.schedule_job(session, job_id, policy)  # type: ignore[arg-type]
            statements.start(None)
        except ConflictError:
            statements.start(None)
            matching.drop_job()
            unplaced += 1
            with database.transaction() as session:
                submission.cancel_job(session, job_id)
            continue
        allocate_ms.append((time.perf_counter() - start) * 1000)
        allocate_cpu_ms.append((time.process_time() - cpu) * 1000)
        matching.close_job()
        assert job.worker_id is not None
        running.append((job_id, names[job.worker_id]))
        while len(running) > WINDOW_PER_NODE * nodes:
            _free(database, running.popleft(), free_ms, statements)
    while running:
        _free(database, running.popleft(), free_ms, statements)
    cpu = CpuSample.now(database.url).minus(cpu_before)
    with database.transaction(write=False) as session:
        left = session.scalar(
            select(func.count()).where(InventoryCount.free != InventoryCount.total)
        )
    assert left == 0, "every count is full again"
    matching.remove()
    total_seconds = (sum(allocate_ms) + sum(free_ms)) / 1000
    return {
        "register_s": registered,
        "sample": float(len(sample)),
        "allocated": float(len(allocate_ms)),
        "unplaced": float(unplaced),
        "allocate_median_ms": statistics.median(allocate_ms),
        "allocate_p95_ms": statistics.quantiles(allocate_ms, n=20)[-1],
        "allocate_cpu_median_ms": statistics.median(allocate_cpu_ms),
        "match_median_ms": statistics.median(matching.per_job),
        "allocate_statements": statements.counts["allocate"] / len(allocate_ms),
        "free_statements": statements.counts["free"] / len(free_ms),
        "free_median_ms": statistics.median(free_ms),
        "jobs_per_s": len(allocate_ms) / total_seconds,
        # The whole loop (submissions, allocations and releases) per allocated job: this
        # process (Python, and SQLite's work on SQLite) and PostgreSQL's backends.
        "client_cpu_per_job_ms": cpu.client / len(allocate_ms) * 1000,
        "database_cpu_per_job_ms": cpu.database / len(allocate_ms) * 1000,
        "loop_s": cpu.wall,
    }


class _MatchTimer:
    """Times ``scheduling.find_placement`` inside each allocation: the SQL filter and the
    allocator walk, what Fluxion's "match" figure covers (its booking is an in-memory
    graph update; ours is the lock, the booking statement and the commit). Wrapped in
    this process only, for the bench's lifetime."""

    def __init__(self) -> None:
        self.per_job: list[float] = []
        self._current = 0.0
        self._original = scheduling.find_placement

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return self._original(*args, **kwargs)
            finally:
                self._current += (time.perf_counter() - began) * 1000

        scheduling.find_placement = timed  # type: ignore[assignment]

    def close_job(self) -> None:
        self.per_job.append(self._current)
        self._current = 0.0

    def drop_job(self) -> None:
        self._current = 0.0

    def remove(self) -> None:
        scheduling.find_placement = self._original  # type: ignore[assignment]


class _Statements:
    """Counts the SQL statements sent while a phase is on (BEGIN included, COMMIT not)."""

    def __init__(self, database: Database) -> None:
        self.counts = {"allocate": 0, "free": 0}
        self.phase: str | None = None
        event.listen(database.engine, "before_cursor_execute", self._count)

    def start(self, phase: str | None) -> None:
        self.phase = phase

    def _count(self, *_args: Any) -> None:
        if self.phase is not None:
            self.counts[self.phase] += 1


def _free(
    database: Database, item: tuple[int, str], times: list[float], statements: _Statements
) -> None:
    statements.start("free")
    start = time.perf_counter()
    with database.transaction() as session:
        dispatch.finish(session, item[0], item[1], "finished")
    times.append((time.perf_counter() - start) * 1000)
    statements.start(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--nodes", type=int, default=4096, help="nodes (default 4,096)")
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs (default 10,000)")
    parser.add_argument("--policy", choices=("first", "pack"), default="first")
    parser.add_argument(
        "--analyze-every",
        type=int,
        default=500,
        help="PostgreSQL: ANALYZE every N jobs, untimed, as autovacuum would (0: never)",
    )
    args = parser.parse_args()
    if args.backend == "postgresql":
        url = os.environ.get("JOBMATCH_BENCH_POSTGRES_URL") or os.environ.get(
            "JOBMATCH_TEST_POSTGRES_URL"
        )
        if not url:
            parser.error("set JOBMATCH_BENCH_POSTGRES_URL for --backend postgresql")
        os.environ["JOBMATCH_TEST_POSTGRES_URL"] = url
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_database(args.backend, Path(directory)) as url,
    ):
        migrate.upgrade(url)
        database = Database(url)
        try:
            result = run(database, args.nodes, args.jobs, args.policy, args.analyze_every)
        finally:
            database.dispose()
    print(f"{args.backend}: {args.nodes} nodes ({NODE}), {args.jobs} jobs, policy {args.policy}")
    print(f"  {load_average()} at the end")
    print(
        f"  registered in {result['register_s']:.1f} s (bulk; {int(result['sample'])} nodes "
        "checked against upsert_worker)"
    )
    print(
        f"  allocated {int(result['allocated'])}, unplaceable when submitted "
        f"{int(result['unplaced'])}"
    )
    print(
        f"  allocate: median {result['allocate_median_ms']:.2f} ms, "
        f"p95 {result['allocate_p95_ms']:.2f} ms, CPU median "
        f"{result['allocate_cpu_median_ms']:.2f} ms; free: median "
        f"{result['free_median_ms']:.2f} ms; {result['jobs_per_s']:.0f} jobs/s "
        "(allocated and freed)"
    )
    print(
        f"  of which match (SQL filter and allocator walk, Fluxion's 'match'): median "
        f"{result['match_median_ms']:.2f} ms"
    )
    database_cpu = (
        f"PostgreSQL's backends {result['database_cpu_per_job_ms']:.2f} ms"
        if args.backend == "postgresql"
        else "SQLite runs inside this process"
    )
    print(
        f"  CPU per job over the whole loop (submit, allocate, free; "
        f"{result['loop_s']:.0f} s): this process {result['client_cpu_per_job_ms']:.2f} ms, "
        f"{database_cpu}"
    )
    print(
        f"  SQL statements: {result['allocate_statements']:.1f} per allocation, "
        f"{result['free_statements']:.1f} per release"
    )


if __name__ == "__main__":
    main()
