"""The scheduler's fast paths decide exactly as the paths they replace (issue 9):

* the survivors query driven by a room index (migration 0012) returns the same workers in
  the same order as the walk over every worker, on a fragmented cluster whose ranks run
  against the ids, for every shape and limit, under both policies (``pack`` sorts the
  driver's rows before the filter), and so do SQLite's pack batches over the ranked
  workers;
* the ranks copied onto inventories and counts follow the worker's rank;
* on PostgreSQL, booking and starting in one statement (booking_statements) and ending a
  job that holds vertices in two (release_statements) leave every row as the statement-
  by-statement paths do (each tried in a savepoint, compared, and rolled back);
* vertices built from rows (Vertex.built) equal those the constructor makes, and
  scheduling leaves no tree or search to the cyclic garbage collector.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg import _queries
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import (
    Allocation,
    InventoryBooking,
    InventoryCount,
    InventoryVertex,
    Job,
    JobEvent,
    JobState,
    QueueInstance,
    Worker,
    WorkerInventory,
)
from app.db.tables import CATEGORIES
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.allocation import allocator as allocation
from app.matching.allocation import book_pg as booking_statements
from app.matching.allocation import bookings as vertex_bookings
from app.matching.allocation import trees
from app.matching.allocation.allocator import POLICIES, Policy
from app.matching.allocation.vertex_requests import node_needs, whole_types
from app.matching.allocation.vertices import Vertex
from app.matching.dispatch import finish_pg as release_statements
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

NODE = "node/[socket=2/[core=4;gpu=1];memory=16{unit:GB}]"
NODES = 8
SHAPES = (
    "slot/core=2",
    "slot/core=3",
    "slot/[core=2;gpu=1]",
    "slot/socket",
    "slot/node",
    "slot=2/node",
    "node=2/slot/[core=1;memory=2{unit:GB}]",
    "node/socket=2/slot/core=1",
    "slot/[core=3;memory=4{unit:GB}]",
    "slot=3/[core=1;gpu=1]",
    "node=3/slot/core=2",
)


def _cluster(database: Database) -> None:
    """Ranks against the ids (n0 has the highest), so an order by id would differ."""
    with database.transaction() as session:
        for index in range(NODES):
            workers.upsert_worker(
                session,
                WorkerSpec(name=f"n{index}", rank=NODES - index, slots=16, inventory=NODE),
            )


def _submit(database: Database, shape: str) -> int:
    with database.transaction() as session:
        return submission.submit_job(session, JobSpec(shape=shape), submitter="t").id


def _fragment(
    database: Database, rng: random.Random, jobs: int, policy: Policy = "first"
) -> list[tuple[int, str]]:
    """Allocate random jobs and finish some of them: the running ones."""
    running: list[tuple[int, str]] = []
    for _ in range(jobs):
        job_id = _submit(database, rng.choice(SHAPES))
        try:
            with database.transaction() as session:
                job = scheduling.schedule_job(session, job_id, policy)
                leader = session.scalar(select(Worker.name).where(Worker.id == job.worker_id))
                assert leader is not None
            running.append((job_id, leader))
        except ConflictError:
            with database.transaction() as session:
                submission.cancel_job(session, job_id)
        if running and rng.random() < 0.3:
            job_id, leader = running.pop(rng.randrange(len(running)))
            with database.transaction() as session:
                dispatch.finish(session, job_id, leader, "finished")
    return running


@pytest.mark.parametrize("policy", POLICIES)
def test_room_drivers_return_the_workers_the_full_walk_returns(
    database: Database, policy: Policy
) -> None:
    _cluster(database)
    rng = random.Random(7)
    compared = 0
    drivers: set[str] = set()
    for _ in range(6):
        _fragment(database, rng, 6, policy)
        for shape in SHAPES:
            job_id = _submit(database, shape)
            with database.transaction() as session:
                job = session.get(Job, job_id)
                assert job is not None and job.category_id is not None
                requests = dispatch.category_requests(_jobspec(session, job.category_id))
                drivers.add(scheduling._driver(policy, whole_types(requests), node_needs(requests)))
                json_rows = dialect.json_rows_function(session.connection())
                driven, parameters = scheduling.survivors_query(
                    policy, requests, job.category_id, json_rows
                )
                walked, _ = scheduling.survivors_query(
                    policy, requests, job.category_id, json_rows, driver="workers"
                )
                for limit in (1, 2, 3, NODES + 1):
                    got = _survivors(session, driven, {**parameters, "limit": limit})
                    want = _survivors(session, walked, {**parameters, "limit": limit})
                    assert got == want, (shape, limit)
                    if policy == "pack":
                        plain = {**parameters, "limit": limit, "prefetch": 0}
                        walked_rows = [tuple(row) for row in session.execute(walked, plain)]
                        # The default batches, and batches of one limit each (several
                        # batches on eight nodes, the last one cut short).
                        for batch in (scheduling.BATCH, 1):
                            batched = _batched(
                                session, requests, job.category_id, json_rows, limit, batch
                            )
                            assert batched == walked_rows, (shape, limit, batch)
                compared += 1
            with database.transaction() as session:
                submission.cancel_job(session, job_id)
    assert compared == 6 * len(SHAPES)
    assert drivers == {"room", "untouched"}


def _batched(
    session: Session,
    requests: Any,
    category_id: int,
    json_rows: tuple[str, str],
    limit: int,
    batch: int,
) -> list[tuple[Any, ...]]:
    """The pack survivors as SQLite's find_placement gets them: the driver's workers
    ranked in pack order, then the filter over them in batches (batch x limit each)."""
    connection = session.connection()
    ranking = scheduling.pack_order_query(requests, category_id)
    # Every shape here has a driver (the test asserts it of the drivers seen).
    assert ranking is not None
    ranked = list(connection.execute(*ranking).scalars())
    listed, parameters = scheduling.survivors_query(
        "pack", requests, category_id, json_rows, listed=True
    )
    rows = scheduling.listed_survivors(connection, listed, parameters, ranked, limit, batch)
    return [tuple(row) for row in rows]


def _survivors(session: Session, query: Any, parameters: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The survivors' rows, their free counts and the rows below their nodes (for the
    first two) parsed and checked against the tables."""
    out = []
    for ordinal, row in enumerate(session.execute(query, {**parameters, "prefetch": 2})):
        below = trees.parse_rows_below(row[-1])
        if ordinal < 2:
            stored_below = session.execute(trees._BELOW_NODES, {"worker_ids": [row[0]]}).all()
            assert below is not None
            assert sorted(map(tuple, below)) == sorted(map(tuple, stored_below))
        else:
            assert below is None
        counts = trees.parse_free_counts(row[-2])
        stored = {
            (type_, unit or None): free
            for type_, unit, free in session.execute(
                select(InventoryCount.type, InventoryCount.unit, InventoryCount.free).where(
                    InventoryCount.worker_id == row[0]
                )
            )
        }
        assert counts == stored
        out.append((*row[:-2], sorted(counts.items())))
    return out


def _jobspec(session: Session, category_id: int) -> str:
    jobspec = session.scalar(select(CATEGORIES.c.jobspec).where(CATEGORIES.c.id == category_id))
    assert jobspec is not None
    return str(jobspec)


def _fields(vertex: Vertex) -> tuple[Any, ...]:
    parent = vertex.parent
    return (
        vertex.key,
        vertex.type,
        vertex.index,
        vertex.unit,
        vertex.size,
        vertex.used,
        vertex.held,
        vertex.shared,
        vertex.worker,
        vertex.rank,
        vertex.place,
        list(vertex.free.items()),
        vertex.pristine,
        None if parent is None else parent.key,
        [_fields(child) for child in vertex.loaded_children],
    )


def test_built_vertices_equal_constructed_ones() -> None:
    """Random subtrees (held, shared, drawn pools; a worker given or inherited): the fast
    constructor leaves every field, free count and the order of the counts as __init__."""
    rng = random.Random(3)
    for _ in range(300):
        seed = rng.random()
        slow = _random_subtree(0, False, random.Random(seed), iter(range(1, 1000)))
        fast = _random_subtree(0, True, random.Random(seed), iter(range(1, 1000)))
        assert _fields(fast) == _fields(slow)


def _random_subtree(depth: int, fast: bool, state: random.Random, keys: Iterator[int]) -> Vertex:
    fanout = state.randrange(4) if depth < 3 else 0
    children = [_random_subtree(depth + 1, fast, state, keys) for _ in range(fanout)]
    unit = state.choice([None, None, "GB"]) if not children else None
    size = state.randrange(1, 5) if unit else 1
    used = state.randrange(size + 1) if unit else 0
    held = state.random() < 0.2
    shared = state.randrange(2)
    worker = state.choice([None, "n1"])
    rank = 7 if worker else None
    key = next(keys)
    type_ = state.choice(["socket", "core", "gpu"])
    place = (1, key, key + 3)
    if fast:
        return Vertex.built(
            key, type_, key, unit, size, used, held, shared, worker, rank, children, place
        )
    return Vertex(
        key,
        type_,
        key,
        unit=unit,
        size=size,
        used=used,
        held=held,
        shared=shared,
        worker=worker,
        rank=rank,
        children=children,
        place=place,
    )


def test_scheduling_leaves_no_cyclic_garbage(database: Database) -> None:
    """The allocator's trees (parents and children, lazy nodes and their loader) are
    unlinked once booked, and its helpers make no self-referencing closures: nothing of
    an allocation waits for the cyclic collector, whose runs cost more than the walk."""
    _cluster(database)
    rng = random.Random(9)
    _fragment(database, rng, 8)
    scheduled = 0
    for shape in SHAPES:
        job_id = _submit(database, shape)
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            with database.transaction() as session:
                scheduling.schedule_job(session, job_id, "first")
            scheduled += 1
        except ConflictError:
            pass
        finally:
            gc.collect()
            left = [o for o in gc.garbage if isinstance(o, (Vertex, allocation._Search))]
            gc.garbage.clear()
            gc.set_debug(0)
            gc.enable()
        assert not left, shape
    assert scheduled >= len(SHAPES) // 2


def test_rank_copies_follow_the_worker(database: Database) -> None:
    _cluster(database)
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="n3", rank=100, slots=16, inventory=NODE))
        workers.upsert_worker(session, WorkerSpec(name="n4", rank=None, slots=16, inventory=NODE))
    with database.transaction(write=False) as session:
        ranks = dict(session.execute(select(Worker.id, Worker.rank)).all())
        copies = [
            *session.execute(select(WorkerInventory.worker_id, WorkerInventory.rank)),
            *session.execute(select(InventoryCount.worker_id, InventoryCount.rank)),
        ]
    assert copies and all(rank == ranks[worker_id] for worker_id, rank in copies)


# -- PostgreSQL's one-statement writes --------------------------------------------------


def _rows(session: Session) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the writes touch, without timestamps and generated ids."""
    session.flush()
    v, c, b = InventoryVertex, InventoryCount, InventoryBooking
    return {
        "vertices": list(session.execute(select(v.id, v.held_by, v.shared, v.used).order_by(v.id))),
        "counts": list(
            session.execute(
                select(c.worker_id, c.type, c.unit, c.free).order_by(c.worker_id, c.type, c.unit)
            )
        ),
        "untouched": list(
            session.execute(
                select(WorkerInventory.worker_id, WorkerInventory.untouched).order_by(
                    WorkerInventory.worker_id
                )
            )
        ),
        "bookings": sorted(
            session.execute(
                select(
                    b.job_id, b.vertex_id, b.worker_id, b.mode, b.amount, b.released_at.is_(None)
                )
            )
        ),
        "allocations": sorted(
            session.execute(
                select(
                    Allocation.job_id,
                    Allocation.queue_instance_id,
                    Allocation.slots,
                    Allocation.released_at.is_(None),
                )
            )
        ),
        "slots": list(
            session.execute(
                select(QueueInstance.id, QueueInstance.used_slots).order_by(QueueInstance.id)
            )
        ),
        "jobs": list(
            session.execute(
                select(
                    Job.id,
                    Job.state,
                    Job.worker_id,
                    Job.exit_code,
                    Job.output,
                    Job.failure_reason,
                    Job.ended_at.is_(None),
                ).order_by(Job.id)
            )
        ),
        "events": list(
            session.execute(
                select(JobEvent.job_id, JobEvent.kind, JobEvent.worker, JobEvent.detail).order_by(
                    JobEvent.id
                )
            )
        ),
    }


def _postgresql_only(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("data-modifying CTEs: PostgreSQL only")


def test_one_statement_start_books_as_statement_by_statement(
    backend: str, database: Database
) -> None:
    _postgresql_only(backend)
    _cluster(database)
    rng = random.Random(11)
    _fragment(database, rng, 10)
    tried = 0
    for shape in SHAPES * 2:
        job_id = _submit(database, shape)
        with database.transaction() as session:
            job = session.get(Job, job_id)
            assert job is not None
            placement = scheduling.find_placement(session, job, "first").outcome.placement
            if placement is None:
                continue
            leader = next(n.place[0] for n in placement.nodes() if n.place is not None)
            plan = vertex_bookings.plan_bookings(session, job, placement)
            results = {}
            for one_statement in (True, False):
                savepoint = session.begin_nested()
                scheduling.start_placed(session, job, plan, leader, one_statement=one_statement)
                results[one_statement] = _rows(session)
                savepoint.rollback()
                session.expire_all()
            assert results[True] == results[False], shape
            # Keep it running (the plain way) for the next ones to meet.
            scheduling.start_placed(session, job, plan, leader, one_statement=True)
            tried += 1
    assert tried >= len(SHAPES)


def _planned(database: Database, job_id: int) -> tuple[vertex_bookings.BookingPlan, int]:
    with database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        placement = scheduling.find_placement(session, job, "first").outcome.placement
        assert placement is not None
        plan = vertex_bookings.plan_bookings(session, job, placement)
    return plan, plan.workers[0]


def test_one_statement_start_refuses_a_taken_vertex(backend: str, database: Database) -> None:
    """A stale placement books nothing and writes no booking row (whose unique index
    would otherwise refuse it): a ConflictError, as statement by statement."""
    _postgresql_only(backend)
    _cluster(database)
    first = _submit(database, "slot/node")
    second = _submit(database, "slot/node")
    plan, leader = _planned(database, second)  # stale once the first job is placed
    with database.transaction() as session:
        scheduling.schedule_job(session, first, "first")
    for one_statement in (True, False):
        with pytest.raises(ConflictError), database.transaction() as session:
            job = session.get(Job, second)
            assert job is not None
            scheduling.start_placed(session, job, plan, leader, one_statement=one_statement)
    with database.transaction(write=False) as session:
        assert session.get(Job, second).state is JobState.WAITING  # type: ignore[union-attr]


def _written_for(session: Session, job_id: int) -> tuple[int, int, int]:
    """Vertices held, booking rows and allocations of the job."""
    return (
        len(
            session.scalars(
                select(InventoryVertex.id).where(InventoryVertex.held_by == job_id)
            ).all()
        ),
        len(
            session.scalars(
                select(InventoryBooking.id).where(InventoryBooking.job_id == job_id)
            ).all()
        ),
        len(session.scalars(select(Allocation.id).where(Allocation.job_id == job_id)).all()),
    )


def test_one_statement_start_refuses_a_job_that_stopped_waiting(
    backend: str, database: Database
) -> None:
    """The job's state is checked under its lock inside the statement (the start's
    UPDATE, its first CTE), and every other write of the statement is conditional on
    that start: a job cancelled after its placement was found gets the same
    ConflictError as with the separate lock, and nothing is written."""
    _postgresql_only(backend)
    _cluster(database)
    job_id = _submit(database, "slot/[core=8;gpu=1]")
    plan, leader = _planned(database, job_id)
    with database.transaction() as session:
        submission.cancel_job(session, job_id)
    with database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        with pytest.raises(ConflictError, match="cancelled, not waiting"):
            scheduling.start_placed(session, job, plan, leader, one_statement=True)
        assert _written_for(session, job_id) == (0, 0, 0)
        used = session.scalars(select(QueueInstance.used_slots)).all()
        assert set(used) == {0}


def test_one_statement_start_takes_the_workers_lock_before_writing_and_stamping(
    backend: str, database: Database
) -> None:
    """The lock order of every writer (workers, then the job, then what they hold) holds
    inside the one statement: while another transaction holds the leader's row, the
    allocation waits, and it has written nothing yet (its transaction has no id: a
    write or a row lock would have given it one). Its times are taken after the wait:
    the job's start, its allocation and its bookings are later than anything the
    holder did before it let go (with a time taken before the statement, a booking
    could predate the release it waited for, and the books showed a vertex held twice:
    test_allocation_concurrency caught it)."""
    _postgresql_only(backend)
    _cluster(database)
    job_id = _submit(database, "slot/node")
    plan, leader = _planned(database, job_id)
    outcome: dict[str, Any] = {}

    def place_requests() -> None:
        try:
            with database.transaction() as session:
                job = session.get(Job, job_id)
                assert job is not None
                scheduling.start_placed(session, job, plan, leader, one_statement=True)
            outcome["done"] = True
        except Exception as error:  # reported by the assertion below
            outcome["error"] = error

    with database.engine.connect() as blocker, database.engine.connect() as observer:
        blocker.execute(select(Worker.id).where(Worker.id == leader).with_for_update())
        thread = threading.Thread(target=place_requests)
        thread.start()
        waiting = None
        for _ in range(200):
            waiting = observer.execute(
                text(
                    "SELECT backend_xid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%lk AS%' AND datname = current_database()"
                )
            ).one_or_none()
            observer.rollback()
            if waiting is not None:
                break
            time.sleep(0.05)
        assert waiting is not None, "the allocation never waited for the worker's lock"
        assert waiting.backend_xid is None, "it wrote before it had the worker's lock"
        assert "done" not in outcome
        time.sleep(0.01)
        # What the holder would stamp as it releases, just before it lets go.
        released_at = utcnow()
        blocker.commit()
        thread.join(timeout=30)
    assert outcome == {"done": True}
    with database.transaction(write=False) as session:
        job = session.get(Job, job_id)
        assert job is not None and job.state is JobState.RUNNING
        assert job.started_at is not None and job.started_at >= released_at
        allocated = session.scalars(
            select(Allocation.allocated_at).where(Allocation.job_id == job_id)
        )
        booked = session.scalars(
            select(InventoryBooking.booked_at).where(InventoryBooking.job_id == job_id)
        )
        times = [*allocated, *booked]
        assert len(times) >= 2
        assert set(times) == {job.started_at}


@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_two_statement_finish_releases_as_the_general_path(
    backend: str, database: Database, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    _postgresql_only(backend)
    _cluster(database)
    running = _fragment(database, random.Random(5), 14)
    assert running
    general = release_statements.finish_holding_vertices
    fast_ends: list[Job] = []

    def spy(*args: Any) -> Job | None:
        ended = general(*args)
        if ended is not None:
            fast_ends.append(ended)
        return ended

    for job_id, leader in running:
        with database.transaction() as session:
            results = {}
            for fast in (True, False):
                savepoint = session.begin_nested()
                monkeypatch.setattr(
                    dispatch,
                    "finish_holding_vertices",
                    spy if fast else (lambda *_args: None),
                )
                ended = dispatch.finish(
                    session,
                    job_id,
                    leader,
                    outcome,
                    "why" if outcome == "failed" else None,
                    exit_code=3,
                    output="out",
                )
                assert ended.state.value == outcome
                results[fast] = _rows(session)
                savepoint.rollback()
                session.expire_all()
            assert results[True] == results[False], job_id
    # Every end took the two statements (none was handed to the general path).
    assert len(fast_ends) == len(running)
    assert {"shared", "draw", "exclusive"} <= {row[3] for row in results[True]["bookings"]}


def test_one_statement_start_stays_within_psycopgs_statement_cache() -> None:
    """psycopg caches the conversion of its %(name)s placeholders only for statements of
    up to 4,096 characters and converts longer ones on every execution (0.3 ms for this
    one): the booking statement, as psycopg receives it, must stay under that."""
    compiled = booking_statements._BOOK_AND_START.compile(dialect=PGDialect_psycopg())
    assert len(str(compiled)) <= _queries.MAX_CACHED_STATEMENT_LENGTH
