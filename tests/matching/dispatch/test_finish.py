"""Finishing a pulled job (app/matching/dispatch/pull.py, finish): who may report an outcome,
and the slots and allocations freed on finish, failure and cancel."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Allocation, JobState, QueueInstance
from app.matching import submission
from app.matching.dispatch import pull as dispatch
from app.matching.errors import ConflictError, ForbiddenError
from tests.support.announcements import listening
from tests.support.pulls import add_worker, pull_job, submit_job
from tests.support.statements import statements_sent


def test_failure_and_cancel_free_slots(database: Database) -> None:
    add_worker(database, "w", slots=1)
    first = submit_job(database)
    second = submit_job(database)
    assert pull_job(database, "w") == first
    with database.transaction() as session:
        job = dispatch.finish(session, first, "w", "failed", "exit code 3")
        assert job.state is JobState.FAILED and job.failure_reason == "exit code 3"
    assert pull_job(database, "w") == second
    with database.transaction() as session:
        assert submission.cancel_job(session, second).state is JobState.CANCELLED
        assert session.scalar(select(QueueInstance.used_slots)) == 0
        assert (
            session.scalar(
                select(func.count()).select_from(Allocation).where(Allocation.released_at.is_(None))
            )
            == 0
        )


def test_finish_rules(database: Database) -> None:
    add_worker(database, "w")
    add_worker(database, "other")
    job = submit_job(database)
    with database.transaction() as session, pytest.raises(ForbiddenError):
        dispatch.finish(session, job, "w", "finished")  # not dispatched to anyone yet
    assert pull_job(database, "w") == job
    with database.transaction() as session, pytest.raises(ForbiddenError):
        dispatch.finish(session, job, "other", "finished")
    with database.transaction() as session:
        dispatch.finish(session, job, "w", "finished")
    # The same report again (its reply was lost) is answered as the first (issue 19);
    # another outcome for an ended job is refused.
    with database.transaction() as session:
        assert dispatch.finish(session, job, "w", "finished").state is JobState.FINISHED
    with database.transaction() as session, pytest.raises(ConflictError):
        dispatch.finish(session, job, "w", "failed")
    with database.transaction() as session, pytest.raises(ForbiddenError):
        dispatch.finish(session, job, "other", "finished")
    with database.transaction() as session, pytest.raises(ConflictError):
        submission.cancel_job(session, job)


def test_finish_takes_the_short_road_and_frees_the_same(database: Database) -> None:
    """A job holding only slots ends through finish_statements (a few UPDATEs); the
    result must equal the general path's: state, reason, exit code, output, ended_at,
    allocation released, slots back, history recorded."""
    from app.db.models import Job, JobEvent, JobEventKind

    add_worker(database, "w", slots=2)
    first, second = submit_job(database), submit_job(database)
    assert pull_job(database, "w") == first
    assert pull_job(database, "w") == second
    with database.transaction() as session:
        dispatch.finish(session, first, "w", "finished", exit_code=0, output="x" * 70_000)
        dispatch.finish(session, second, "w", "failed")
    with database.transaction() as session:
        done, failed = session.get(Job, first), session.get(Job, second)
        assert done is not None and failed is not None
        assert (done.state, done.exit_code, len(done.output or "")) == (
            JobState.FINISHED,
            0,
            dispatch.MAX_OUTPUT,
        )
        assert done.failure_reason is None and done.ended_at is not None
        assert (failed.state, failed.failure_reason) == (
            JobState.FAILED,
            "the worker reported failure",
        )
        assert session.scalar(select(QueueInstance.used_slots)) == 0
        assert (
            session.scalar(
                select(func.count()).where(
                    Allocation.job_id.in_([first, second]), Allocation.released_at.is_(None)
                )
            )
            == 0
        )
        kinds = session.scalars(
            select(JobEvent.kind).where(JobEvent.job_id == second).order_by(JobEvent.id)
        ).all()
        assert kinds[-2:] == [JobEventKind.DISPATCHED, JobEventKind.FAILED]


def test_a_slots_only_finish_is_two_statements_on_postgresql(database: Database) -> None:
    """Issue 23: the worker's lock, then the job's end, the slots given back, the event and
    the announcement in one statement; the lock comes first so that the second reads
    after it."""
    from app.db.models import JobEvent, JobEventKind

    if database.dialect_name != "postgresql":
        pytest.skip("data-modifying CTEs are PostgreSQL's")
    add_worker(database, "w", slots=2)
    job = submit_job(database)
    assert pull_job(database, "w") == job
    with listening(database) as heard:
        with database.transaction() as session, statements_sent(database.engine) as sent:
            ended = dispatch.finish(session, job, "w", "failed", "oom", exit_code=137)
        # The statement announced the worker's room itself: no pg_notify of its own.
        assert heard.wait_for(f"r{ended.worker_id}")
    assert [statement.split()[0] for statement in sent] == ["UPDATE", "WITH"]
    assert sent[0].startswith("UPDATE workers")
    assert (ended.state, ended.failure_reason, ended.exit_code) == (JobState.FAILED, "oom", 137)
    with database.transaction() as session:
        assert session.scalar(select(QueueInstance.used_slots)) == 0
        assert (
            session.scalar(select(Allocation.released_at).where(Allocation.job_id == job))
            == ended.ended_at
        )
        last = session.scalars(
            select(JobEvent).where(JobEvent.job_id == job).order_by(JobEvent.id.desc())
        ).first()
        assert last is not None
        assert (last.kind, last.worker, last.detail) == (JobEventKind.FAILED, "w", "oom")
