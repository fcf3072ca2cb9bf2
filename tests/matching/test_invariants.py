"""The invariant checker finds each kind of broken book (so the crash and concurrency
tests that rely on it can fail)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.db.engine import Database
from app.matching import dispatch, submission, workers
from app.matching.invariants import violations
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.api.test_matching_api import register, submit


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
    lic = {
        "name": "lic",
        "shortcut": "lic",
        "type": "INT",
        "relop": "<=",
        "requestable": "YES",
        "consumable": "YES",
        "default": "0",
    }
    assert client.post("/v1/attributes", json=lic, headers=admin).status_code == 201
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
        assert violations(session) == [f"job {job_id} is failed but holds 1 consumable bookings"]


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
