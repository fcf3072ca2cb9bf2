"""The invariant checker finds each kind of broken book (so the crash and concurrency
tests that rely on it can fail)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.dispatch import pull as dispatch
from app.matching.invariants import violations
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.support.http_api import define_license, register, submit


def _running_job(database: Database) -> int:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w", slots=3))
        submission.submit_job(session, JobSpec(slots=2), submitter="t")
        job = dispatch.pull(session, "w")
        assert job is not None
        assert violations(session) == []
        return job.id


def test_booking_that_does_not_match_allocations(database: Database) -> None:
    _running_job(database)
    with database.transaction() as session:
        session.execute(text("UPDATE queue_instances SET used_slots = 3"))
        qi = session.execute(text("SELECT id FROM queue_instances")).scalar_one()
        assert violations(session) == [f"queue instance {qi} books 3 slots, allocations hold 2"]


def test_finished_job_still_holding_slots(database: Database) -> None:
    job_id = _running_job(database)
    with database.transaction() as session:
        session.execute(text("UPDATE jobs SET state = 'finished'"))
        (problem,) = violations(session)
        assert problem.startswith(f"job {job_id} is finished") and "1 open allocations" in problem


def test_running_job_without_slots(database: Database) -> None:
    job_id = _running_job(database)
    with database.transaction() as session:
        session.execute(text("UPDATE allocations SET released_at = allocated_at"))
        session.execute(text("UPDATE queue_instances SET used_slots = 0"))
        (problem,) = violations(session)
        assert problem.startswith(f"job {job_id} is running") and "0 open allocations" in problem


def _running_consumable_job(client: TestClient, admin: dict[str, str]) -> int:
    """A job holding lic=2 of a global pool of 3 on a host, through the API."""
    define_license(client, admin)
    worker = register(client, admin, "h1", slots=2)
    put = client.put("/v1/values/global", json={"complex_values": {"lic": "3"}}, headers=admin)
    assert put.status_code == 200, put.text
    job = submit(client, admin, hard="lic=2")
    assert client.post("/v1/workers/h1/pull", headers=worker).json()["id"] == job["id"]
    return int(job["id"])


def test_consumable_booking_that_does_not_match_job_bookings(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    _running_consumable_job(client, admin_headers)
    with database.transaction() as session:
        assert violations(session) == []
        session.execute(text("UPDATE consumable_usage SET used = 3"))
        usage = session.execute(text("SELECT id FROM consumable_usage")).scalar_one()
        assert violations(session) == [
            f"consumable usage {usage} (global) books 3 (+0 non-exclusive), running jobs hold 2 "
            "(+0)"
        ]


def test_consumable_booked_beyond_capacity_is_refused_by_the_schema(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """The checker's 0..capacity rule is the last line; the CHECK constraint comes first."""
    _running_consumable_job(client, admin_headers)
    with pytest.raises(IntegrityError), database.transaction() as session:
        session.execute(text("UPDATE consumable_usage SET capacity = 1"))
    with database.transaction() as session:
        assert violations(session) == []


def test_ended_job_still_holding_consumables(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    job_id = _running_consumable_job(client, admin_headers)
    with database.transaction() as session:
        session.execute(text("UPDATE jobs SET state = 'failed'"))
        session.execute(text("UPDATE allocations SET released_at = allocated_at"))
        session.execute(text("UPDATE queue_instances SET used_slots = 0"))
        assert violations(session) == [f"job {job_id} is failed but holds 1 consumable booking"]


def test_parallel_environment_lending_more_than_it_has(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    worker = register(client, admin_headers, "h1", slots=4)
    pe = client.put("/v1/pes/mpi", json={"allocation_rule": "$pe_slots"}, headers=admin_headers)
    assert pe.status_code == 200, pe.text
    submit(client, admin_headers, pe="mpi", pe_slots="3")
    assert client.post("/v1/workers/h1/pull", headers=worker).status_code == 200
    with database.transaction() as session:
        assert violations(session) == []
        session.execute(text("UPDATE parallel_environments SET slots = 2"))
        assert violations(session) == ["parallel environment mpi lends 3 of 2 slots"]


def _allocated_job(database: Database) -> tuple[int, int]:
    """A job holding socket 0 of n0 (node/socket=2/core=2) whole, through the scheduler;
    the job's id and the worker's."""
    with database.transaction() as session:
        worker, _ = workers.upsert_worker(
            session, WorkerSpec(name="n0", rank=0, slots=4, inventory="node/socket=2/core=2")
        )
        job_id = submission.submit_job(session, JobSpec(shape="slot/socket"), submitter="t").id
    with database.transaction() as session:
        scheduling.schedule_job(session, job_id, "first")
        assert violations(session) == []
    return job_id, worker.id


def _set_vertex(session: Session, worker_id: int, position: int, assignment: str) -> int:
    """Change the worker's row at ``position`` behind the books' back; its id."""
    vertex = int(
        session.execute(
            text("SELECT id FROM inventory_vertices WHERE worker_id = :w AND position = :p"),
            {"w": worker_id, "p": position},
        ).scalar_one()
    )
    session.execute(
        text(f"UPDATE inventory_vertices SET {assignment} WHERE id = :v"), {"v": vertex}
    )
    return vertex


def test_vertex_held_without_a_booking(database: Database) -> None:
    """held_by has no foreign key (0014): the checker vouches for it, job by job. Socket 1
    (position 4) is free; holding it for a job that does not exist is reported."""
    _job_id, worker_id = _allocated_job(database)
    with database.transaction() as session:
        vertex = _set_vertex(session, worker_id, 4, "held_by = 999")
        assert violations(session)[0] == (
            f"vertex {vertex} of worker {worker_id} is held by job 999, "
            "which has no active exclusive booking over it"
        )


def test_booked_vertex_held_by_another(database: Database) -> None:
    """Socket 0 is positions 1..3; its first core released behind the booking's back."""
    job_id, worker_id = _allocated_job(database)
    with database.transaction() as session:
        vertex = _set_vertex(session, worker_id, 2, "held_by = NULL")
        booking = session.execute(text("SELECT id FROM inventory_bookings")).scalar_one()
        problems = violations(session)
        assert (
            f"exclusive booking {booking} of job {job_id} covers vertex {vertex} (position 2), "
            "which is held by nobody"
        ) in problems
        # The freed core is also missing from the counts' copy and the untouched counter.
        assert any(p.startswith(f"worker {worker_id} counts core as") for p in problems)
        assert f"worker {worker_id} counts 4 untouched vertices; its rows give 5" in problems


def test_free_count_or_span_that_does_not_match_the_rows(database: Database) -> None:
    _job_id, worker_id = _allocated_job(database)
    with database.transaction() as session:
        session.execute(text("UPDATE inventory_counts SET span = 4 WHERE type = 'socket'"))
        assert violations(session) == [
            f"worker {worker_id} counts socket as (total, free, span) (2, 1, 4); "
            "its vertices give (2, 1, 3)"
        ]


def test_shared_vertex_without_a_shared_booking(database: Database) -> None:
    _job_id, worker_id = _allocated_job(database)
    with database.transaction() as session:
        vertex = _set_vertex(session, worker_id, 5, "shared = 1")
        session.execute(
            text("UPDATE worker_inventories SET untouched = untouched - 1 WHERE worker_id = :w"),
            {"w": worker_id},
        )
        assert violations(session) == [
            f"vertex {vertex} of worker {worker_id} is shared 1 times and has 0 used; "
            "active bookings share it 0 times and draw 0"
        ]


def test_ended_job_still_holding_vertices(database: Database) -> None:
    job_id, _worker_id = _allocated_job(database)
    with database.transaction() as session:
        session.execute(text("UPDATE jobs SET state = 'finished'"))
        session.execute(text("UPDATE allocations SET released_at = allocated_at"))
        session.execute(text("UPDATE queue_instances SET used_slots = 0"))
        assert violations(session) == [f"job {job_id} is finished but holds 1 inventory booking"]
