"""PostgreSQL's one-statement booking and start (app/matching/allocation/book_pg.py) leaves
every row as the statement-by-statement path does (each tried in a savepoint, compared and
rolled back), refuses what that path refuses, keeps the lock order of every writer, and
stays within psycopg's statement cache (issue 9).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from psycopg import _queries
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import (
    Allocation,
    InventoryBooking,
    InventoryVertex,
    Job,
    JobState,
    QueueInstance,
    Worker,
)
from app.matching import submission
from app.matching.allocation import allocate as scheduling
from app.matching.allocation import book_pg as booking_statements
from app.matching.allocation import bookings as vertex_bookings
from app.matching.errors import ConflictError
from tests.support.inventory_cluster import (
    SHAPES,
    build_cluster,
    fragment,
    skip_unless_postgresql,
    submit_shape,
    touched_rows,
)


def test_one_statement_start_books_as_statement_by_statement(
    backend: str, database: Database
) -> None:
    skip_unless_postgresql(backend)
    build_cluster(database)
    rng = random.Random(11)
    fragment(database, rng, 10)
    tried = 0
    for shape in SHAPES * 2:
        job_id = submit_shape(database, shape)
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
                results[one_statement] = touched_rows(session)
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
    skip_unless_postgresql(backend)
    build_cluster(database)
    first = submit_shape(database, "slot/node")
    second = submit_shape(database, "slot/node")
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
    skip_unless_postgresql(backend)
    build_cluster(database)
    job_id = submit_shape(database, "slot/[core=8;gpu=1]")
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
    allocation/test_concurrency.py caught it)."""
    skip_unless_postgresql(backend)
    build_cluster(database)
    job_id = submit_shape(database, "slot/node")
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


def test_one_statement_start_stays_within_psycopgs_statement_cache() -> None:
    """psycopg caches the conversion of its %(name)s placeholders only for statements of
    up to 4,096 characters and converts longer ones on every execution (0.3 ms for this
    one): the booking statement, as psycopg receives it, must stay under that."""
    compiled = booking_statements._BOOK_AND_START.compile(dialect=PGDialect_psycopg())
    assert len(str(compiled)) <= _queries.MAX_CACHED_STATEMENT_LENGTH
