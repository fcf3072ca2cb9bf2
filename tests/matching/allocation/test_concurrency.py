"""Workers with inventories pulling single-node jobs while a scheduler allocates multi-node
jobs on the same workers never book one vertex twice, return every count to full, and
lose no job (issue 9), on SQLite (threads) and PostgreSQL (processes).

Executors are those of the dispatch concurrency test (tests/support/concurrency_worker.py:
pull, hold a few turns, finish); the scheduler (allocation_concurrency_worker.py) calls the
service of POST /v1/jobs/{id}/allocate with both policies, and the executors receive what
it placed on their next pull of its first node (issue 22).
Afterwards:

* every job reached a pull once (placed jobs as deliveries to their first node) and
  finished;
* replaying every booking's [booked_at, released_at) interval over the vertices it covers
  (an exclusive booking covers its whole subtree), no vertex was ever held exclusively by
  one job while another job held, shared or drew from it, and no pool ever gave more than
  its size; single-node jobs only hold vertices of the worker that pulled them;
* the unique partial index refuses a second active exclusive booking of a vertex;
* every count is back to full, equal to the view, with no vertex held, shared or drawn.
"""

from __future__ import annotations

import multiprocessing
import queue
import random
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import IntegrityError

from app.db.engine import Database
from app.db.models import (
    CategoryShape,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Job,
    JobState,
)
from app.matching import submission, workers
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.support.allocation_concurrency_worker import (
    SchedulerPlan,
    SchedulerReport,
    run_scheduler,
    scheduler_process_main,
)
from tests.support.concurrency_worker import Plan, Report, process_main, run_executor

pytestmark = pytest.mark.db

RUN_SECONDS = 40.0
GRACE_SECONDS = 20.0
NODE = "node/[socket=2/[core=4;gpu=1];memory=16{unit:GB}]"
WORKERS = 8
SINGLE_NODE = (
    ("slot/[core=2;gpu=1]", 4),
    ("slot/core=3", 3),
    ("slot/[core=1;memory=4{unit:GB}]", 3),
    ("slot/socket", 2),
    ("core=2", 2),  # shared cores (no slot): other jobs may share them, never hold them
    ("node/socket/core=2", 1),
)
MULTI_NODE = (("node=2/slot/[core=2;gpu=1]", 3), ("slot=2/node", 1), ("node=3/slot/core=1", 2))


def _jobs(seed: int, singles: int, multis: int) -> list[JobSpec]:
    rng = random.Random(seed)

    def pick(table: tuple[tuple[str, int], ...]) -> str:
        return rng.choices([s for s, _ in table], [w for _, w in table])[0]

    specs = [JobSpec(shape=pick(SINGLE_NODE), priority=rng.randint(0, 2)) for _ in range(singles)]
    specs += [JobSpec(shape=pick(MULTI_NODE), priority=rng.randint(0, 2)) for _ in range(multis)]
    rng.shuffle(specs)
    return specs


def _setup(database: Database, specs: list[JobSpec]) -> None:
    with database.transaction() as session:
        for rank in range(WORKERS):
            workers.upsert_worker(
                session, WorkerSpec(name=f"n{rank}", rank=rank, slots=4, inventory=NODE)
            )
        for spec in specs:
            submission.submit_job(session, spec, submitter="concurrency")


def _plans(executors: int, seed: int) -> list[Plan]:
    names = [f"n{i}" for i in range(WORKERS)]
    return [
        Plan(
            executor=f"executor-{i}",
            workers=tuple(names[i::executors]),
            seed=seed * 100 + i,
            run_seconds=RUN_SECONDS,
            max_hold=3,
            failure_rate=0.0,
        )
        for i in range(executors)
    ]


def _run_threads(
    database: Database, plans: list[Plan], scheduler: SchedulerPlan
) -> tuple[list[Report], SchedulerReport, list[str]]:
    go, submitted = threading.Event(), threading.Event()
    submitted.set()  # every job is in before the start
    reports: dict[str, Report] = {}
    out: list[SchedulerReport] = []

    def execute(plan: Plan) -> None:
        reports[plan.executor] = run_executor(database, plan, go, submitted)

    threads = [threading.Thread(target=execute, args=(p,), daemon=True) for p in plans]
    threads.append(
        threading.Thread(
            target=lambda: out.append(run_scheduler(database, scheduler, go, submitted)),
            daemon=True,
        )
    )
    for thread in threads:
        thread.start()
    go.set()
    end = time.monotonic() + RUN_SECONDS + GRACE_SECONDS
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.monotonic()))
    problems = [f"thread {t.name} did not stop (deadlock?)" for t in threads if t.is_alive()]
    return list(reports.values()), out[0] if out else SchedulerReport(), problems


def _run_processes(
    url: str, plans: list[Plan], scheduler: SchedulerPlan
) -> tuple[list[Report], SchedulerReport, list[str]]:
    context = multiprocessing.get_context("spawn")
    go, submitted = context.Event(), context.Event()
    submitted.set()
    results: Any = context.Queue()
    processes = [
        context.Process(target=process_main, args=(url, p, go, submitted, results), name=p.executor)
        for p in plans
    ]
    processes.append(
        context.Process(
            target=scheduler_process_main,
            args=(url, scheduler, go, submitted, results),
            name="scheduler",
        )
    )
    for process in processes:
        process.daemon = True
        process.start()
    problems: list[str] = []
    reports: list[Report] = []
    scheduled: list[SchedulerReport] = []
    ready = 0
    end = time.monotonic() + GRACE_SECONDS
    while ready < len(processes) and time.monotonic() < end:
        try:
            kind, payload = results.get(timeout=1.0)
        except queue.Empty:
            continue
        if kind == "ready":
            ready += 1
        elif kind == "report":
            reports.append(payload)
        else:
            scheduled.append(payload)
    if ready < len(processes):
        problems.append(f"only {ready} of {len(processes)} processes started in time")
    go.set()
    end = time.monotonic() + RUN_SECONDS + GRACE_SECONDS
    while len(reports) + len(scheduled) < len(processes) and time.monotonic() < end:
        try:
            kind, payload = results.get(timeout=1.0)
        except queue.Empty:
            if not any(p.is_alive() for p in processes):
                break
            continue
        if kind == "report":
            reports.append(payload)
        elif kind == "scheduler":
            scheduled.append(payload)
    for process in processes:
        process.join(timeout=max(0.0, end - time.monotonic()) + 1.0)
        if process.is_alive():
            problems.append(f"process {process.name} did not stop (deadlock?)")
            process.terminate()  # a process this test started, by its own handle
            process.join(timeout=5.0)
    return reports, scheduled[0] if scheduled else SchedulerReport(), problems


def _overlaps(a: tuple[datetime, datetime | None], b: tuple[datetime, datetime | None]) -> bool:
    far = datetime.max
    return a[0] < (b[1] or far) and b[0] < (a[1] or far)


def _replay_violations(database: Database) -> list[str]:
    """Every vertex's holders over time, from the bookings: exclusive holds exclude anyone
    else; draws never exceed the pool."""
    with database.transaction(write=False) as session:
        vertices = {
            row.id: row
            for row in session.scalars(select(InventoryVertex).order_by(InventoryVertex.id))
        }
        by_position = {(v.worker_id, v.position): v.id for v in vertices.values()}
        bookings = session.scalars(select(InventoryBooking).order_by(InventoryBooking.id)).all()
        singles = set(
            session.scalars(
                select(Job.id)
                .join(CategoryShape, CategoryShape.category_id == Job.category_id)
                .where(CategoryShape.min_nodes <= 1)
            )
        )
        job_worker = dict(session.execute(select(Job.id, Job.worker_id)).all())
    holds: dict[int, list[tuple[str, int, int, tuple[datetime, datetime | None]]]] = defaultdict(
        list
    )
    problems: list[str] = []
    for b in bookings:
        span = (b.booked_at, b.released_at)
        root = vertices[b.vertex_id]
        if b.job_id in singles and b.worker_id != job_worker[b.job_id]:
            problems.append(f"single-node job {b.job_id} holds a vertex of worker {b.worker_id}")
        if b.mode == "exclusive":
            for position in range(root.position, root.last_position + 1):
                holds[by_position[(root.worker_id, position)]].append(
                    ("exclusive", b.job_id, 1, span)
                )
        else:
            holds[b.vertex_id].append((b.mode, b.job_id, b.amount, span))
    for vertex_id, items in holds.items():
        for i, (mode, job, _, span) in enumerate(items):
            for other_mode, other_job, _, other_span in items[i + 1 :]:
                if (
                    "exclusive" in (mode, other_mode)
                    and job != other_job
                    and _overlaps(span, other_span)
                ):
                    problems.append(
                        f"vertex {vertex_id}: {mode} by job {job} and {other_mode} by job "
                        f"{other_job} overlap"
                    )
        draws = [(span, amount) for mode, _, amount, span in items if mode == "draw"]
        events = sorted(
            [(s[0], 1, a) for s, a in draws] + [(s[1], 0, -a) for s, a in draws if s[1]]
        )
        level = 0
        for _, _, delta in events:  # releases sort before bookings at a tie
            level += delta
            if level > vertices[vertex_id].size:
                problems.append(f"pool {vertex_id} gave {level} of {vertices[vertex_id].size}")
    return problems[:20]


def test_concurrent_pulls_and_allocations_never_overlap(
    database: Database, database_url: str, backend: str
) -> None:
    specs = _jobs(seed=9, singles=140 if backend == "sqlite" else 110, multis=24)
    _setup(database, specs)
    with database.transaction(write=False) as session:
        waiting = session.scalar(select(func.count()).where(Job.state == JobState.WAITING))
    assert waiting == len(specs)
    scheduler = SchedulerPlan(seed=9, run_seconds=RUN_SECONDS)
    started = time.monotonic()
    if backend == "sqlite":
        executors = Database(database_url, busy_timeout=0.1)
        try:
            reports, scheduled, problems = _run_threads(executors, _plans(4, 9), scheduler)
        finally:
            executors.dispose()
    else:
        reports, scheduled, problems = _run_processes(database_url, _plans(3, 9), scheduler)
    duration = time.monotonic() - started
    assert not problems, problems
    errors = [e for r in reports for e in r.errors] + scheduled.errors
    assert not errors, errors
    assert not any(r.timed_out for r in reports) and not scheduled.timed_out, duration
    assert not any(r.still_held for r in reports) and not scheduled.still_held

    # Every job reached a worker's pull exactly once and finished: single-node jobs as
    # pulls, multi-node jobs as deliveries to the first node the scheduler placed them on
    # (issue 22).
    dispatched = Counter([d.job_id for r in reports for d in r.dispatched])
    assert set(dispatched.values()) == {1}
    assert len(dispatched) == len(specs)
    pulled_by = {d.job_id: d.worker for r in reports for d in r.dispatched}
    assert {p.job_id: p.leader for p in scheduled.placed} == {
        p.job_id: pulled_by[p.job_id] for p in scheduled.placed
    }
    assert len(scheduled.placed) == sum(1 for s in specs if s.shape in dict(MULTI_NODE))
    assert {p.policy for p in scheduled.placed} == {"first", "pack"}
    with database.transaction(write=False) as session:
        states = Counter(session.scalars(select(Job.state)))
    assert states == {JobState.FINISHED: len(specs)}

    assert _replay_violations(database) == []
    with database.transaction(write=False) as session:
        counts = session.execute(
            select(
                InventoryCount.worker_id,
                InventoryCount.type,
                InventoryCount.unit,
                InventoryCount.total,
                InventoryCount.free,
            )
        ).all()
        view = session.execute(
            text("SELECT worker_id, type, unit, total, free FROM v_inventory_free")
        ).all()
        assert {tuple(map(str, r)) for r in counts} == {tuple(map(str, r)) for r in view}
        assert all(r.free == r.total for r in counts) and len(counts) == WORKERS * 5
        assert not session.scalar(
            select(func.count()).where(
                (InventoryVertex.held_by.is_not(None))
                | (InventoryVertex.shared != 0)
                | (InventoryVertex.used != 0)
            )
        )
        assert not session.scalar(
            select(func.count()).where(InventoryBooking.released_at.is_(None))
        )
        some = session.execute(select(InventoryBooking.job_id, InventoryBooking.vertex_id)).first()
    assert some is not None
    # The unique partial index refuses a second active exclusive booking of one vertex.
    row = {"job_id": some[0], "vertex_id": some[1], "worker_id": None, "mode": "exclusive"}
    with database.transaction(write=False) as session:
        row["worker_id"] = session.scalar(
            select(InventoryVertex.worker_id).where(InventoryVertex.id == some[1])
        )
    with pytest.raises(IntegrityError), database.transaction() as session:
        session.execute(insert(InventoryBooking), [row, row])
    assert duration < RUN_SECONDS + GRACE_SECONDS
