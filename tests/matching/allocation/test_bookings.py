"""Booking a placement (vertex_bookings.book_placement) from the tree it was made on (issue 9): the
positions come from the tree's vertices, so booking reads nothing back; and a placement
that went stale still fails as a whole, for shared holds (one conditional UPDATE over all
of them) as for exclusive ones, leaving the counts as they were."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event, func, select

from app.db.engine import Database
from app.db.models import InventoryBooking, InventoryCount, InventoryVertex, Job
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.allocation import bookings as vertex_bookings
from app.matching.allocation.placement import Placement
from app.matching.errors import ConflictError
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

NODE = "node/socket=2/core=4"


@contextmanager
def _statements(database: Database) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(_c: object, _cursor: object, statement: str, *_rest: object) -> None:
        sent.append(statement)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


def _submit(database: Database, shape: str) -> int:
    with database.transaction() as session:
        return submission.submit_job(session, JobSpec(shape=shape), submitter="t").id


def _placement(database: Database, job_id: int) -> Placement:
    with database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        placement = scheduling.find_placement(session, job, "first").outcome.placement
    assert placement is not None
    return placement


def _state(database: Database) -> tuple[list[tuple[int, int]], int, int]:
    with database.transaction(write=False) as session:
        counts = [
            (free, total)
            for free, total in session.execute(
                select(InventoryCount.free, InventoryCount.total).order_by(
                    InventoryCount.worker_id, InventoryCount.type, InventoryCount.unit
                )
            )
        ]
        bookings = session.scalar(select(func.count()).select_from(InventoryBooking)) or 0
        touched = (
            session.scalar(
                select(func.count()).where(
                    InventoryVertex.held_by.is_not(None) | (InventoryVertex.shared != 0)
                )
            )
            or 0
        )
    return counts, bookings, touched


@pytest.fixture
def one_node(database: Database) -> Database:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="n0", rank=0, slots=8, inventory=NODE))
    return database


def test_booking_reads_no_positions_back(one_node: Database) -> None:
    database = one_node
    job_id = _submit(database, "slot/node{-x}/socket")
    placement = _placement(database, job_id)
    assert all(b.vertex.place is not None for b in placement.bookings())
    with database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        with _statements(database) as sent:
            touched = vertex_bookings.book_placement(session, job, placement)
    assert len(touched) == 1
    assert not [s for s in sent if s.lstrip().upper().startswith("SELECT")], sent
    with database.transaction(write=False) as session:
        modes = sorted(
            session.scalars(select(InventoryBooking.mode).where(InventoryBooking.job_id == job_id))
        )
    assert modes == ["exclusive", "shared"]


@pytest.mark.parametrize(
    ("stale", "taker"),
    [
        # The node is held shared; another job took the whole node meanwhile.
        ("slot/node{-x}/socket", "slot/node"),
        # A socket is held exclusively; another job took a core of it meanwhile.
        ("slot/socket", "slot/core=1"),
    ],
)
def test_a_stale_placement_books_nothing(one_node: Database, stale: str, taker: str) -> None:
    database = one_node
    job_id = _submit(database, stale)
    placement = _placement(database, job_id)
    taker_id = _submit(database, taker)
    with database.transaction() as session:
        scheduling.schedule_job(session, taker_id, "first")
    before = _state(database)
    with pytest.raises(ConflictError), database.transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        vertex_bookings.book_placement(session, job, placement)
    assert _state(database) == before
