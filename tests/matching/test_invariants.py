"""The invariant checker finds each kind of broken book (so the crash and concurrency
tests that rely on it can fail)."""

from __future__ import annotations

from sqlalchemy import text

from app.db.engine import Database
from app.matching import dispatch, submission, workers
from app.matching.invariants import violations
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec


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
