"""Pull-mode dispatch: order, slot booking, and freeing on finish, failure and cancel."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Allocation, JobState, QueueInstance
from app.matching import dispatch, submission, workers
from app.matching.errors import ConflictError, ForbiddenError
from app.matching.submission import JobSpec
from app.matching.workers import QueueSpec, WorkerSpec


def _submit(database: Database, resources: str = "", *, priority: int = 0, slots: int = 1) -> int:
    with database.transaction() as session:
        spec = JobSpec(resources=resources, priority=priority, slots=slots)
        return submission.submit_job(session, spec, submitter="t").id


def _pull(database: Database, worker: str) -> int | None:
    with database.transaction() as session:
        job = dispatch.pull(session, worker)
        return job.id if job else None


def _worker(database: Database, name: str, resources: str = "", slots: int = 1, **kw) -> None:  # type: ignore[no-untyped-def]
    with database.transaction() as session:
        workers.upsert_worker(
            session, WorkerSpec(name=name, resources=resources, slots=slots, **kw)
        )


def test_highest_priority_then_oldest(database: Database) -> None:
    _worker(database, "w", slots=10)
    old_low = _submit(database, priority=0)
    high = _submit(database, priority=5)
    new_low = _submit(database, priority=0)
    high_other_category = _submit(database, "a: ?x", priority=5)
    assert [_pull(database, "w") for _ in range(4)] == [high, high_other_category, old_low, new_low]
    assert _pull(database, "w") is None


def test_worker_gets_only_what_it_can_run(database: Database) -> None:
    """debusine issue #8: a pulling worker gets the oldest job it *can* run."""
    _worker(database, "javaonly", "language: java", slots=5)
    _worker(database, "pyonly", "language: python", slots=5)
    py_job = _submit(database, "language: python")
    java_job = _submit(database, "language: java")
    assert _pull(database, "javaonly") == java_job
    assert _pull(database, "javaonly") is None
    assert _pull(database, "pyonly") == py_job


def test_slots_are_booked_and_freed(database: Database) -> None:
    _worker(database, "w", slots=3)
    two = _submit(database, slots=2)
    also_two = _submit(database, slots=2)
    one = _submit(database, slots=1)
    assert _pull(database, "w") == two
    # The next job in order needs 2 slots but only 1 is free: the 1-slot job goes first.
    assert _pull(database, "w") == one
    assert _pull(database, "w") is None
    with database.transaction() as session:
        assert session.scalar(select(QueueInstance.used_slots)) == 3
        dispatch.finish(session, two, "w", "finished")
        assert session.scalar(select(QueueInstance.used_slots)) == 1
    assert _pull(database, "w") == also_two


def test_failure_and_cancel_free_slots(database: Database) -> None:
    _worker(database, "w", slots=1)
    first = _submit(database)
    second = _submit(database)
    assert _pull(database, "w") == first
    with database.transaction() as session:
        job = dispatch.finish(session, first, "w", "failed", "exit code 3")
        assert job.state is JobState.FAILED and job.failure_reason == "exit code 3"
    assert _pull(database, "w") == second
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
    _worker(database, "w")
    _worker(database, "other")
    job = _submit(database)
    with database.transaction() as session, pytest.raises(ForbiddenError):
        dispatch.finish(session, job, "w", "finished")  # not dispatched to anyone yet
    assert _pull(database, "w") == job
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


def test_draining_and_offline_workers_get_nothing(database: Database) -> None:
    from app.db.models import WorkerState

    _worker(database, "d", state=WorkerState.DRAINING)
    _worker(database, "o", state=WorkerState.OFFLINE)
    _submit(database)
    assert _pull(database, "d") is None
    assert _pull(database, "o") is None


def test_queue_order_picks_the_queue_instance(database: Database) -> None:
    _worker(database, "w", queues=(QueueSpec("fast", 1), QueueSpec("slow", 2)))
    jobs = [_submit(database) for _ in range(4)]
    assert [_pull(database, "w") for _ in range(4)] == [*jobs[:3], None]
    with database.transaction() as session:
        used = dict(
            session.execute(
                select(QueueInstance.slots, QueueInstance.used_slots).order_by(QueueInstance.id)
            ).all()
        )
    assert used == {1: 1, 2: 2}


def test_a_claimed_job_without_room_waits_again_as_it_was(database: Database) -> None:
    """The pull reads the worker's free slots in the statement that locks it; on
    PostgreSQL that count may predate a pull that committed while this one waited for the
    lock. The booking is conditional: when it finds no room, the claimed job is put back
    exactly as it was (waiting, same attempts, no allocation, no history) and the pull
    gives nothing."""
    from datetime import UTC, datetime

    from app.db.models import Job, JobEvent
    from app.matching import pull_statements

    _worker(database, "w", slots=1)
    running = _submit(database)
    assert _pull(database, "w") == running
    waiting = _submit(database)
    with database.transaction() as session:
        now = datetime.now(UTC)
        puller = pull_statements.lock_puller(session, "w", now)
        assert puller is not None and puller.max_free == 0
        # As if the count had been read before the other pull booked the last slot.
        stale = pull_statements.Puller(**{**puller.__dict__, "max_free": 1})
        claimed, job = pull_statements.take_plain(session, waiting, stale, now)
        assert (claimed, job) == (True, None)
    with database.transaction() as session:
        row = session.get(Job, waiting)
        assert row is not None
        assert (row.state, row.worker_id, row.started_at, row.attempts) == (
            JobState.WAITING,
            None,
            None,
            0,
        )
        assert session.scalar(select(func.count()).where(Allocation.job_id == waiting)) == 0
        assert session.scalar(select(func.count()).where(JobEvent.job_id == waiting)) == 1
        used = session.scalar(select(QueueInstance.used_slots))
        assert used == 1


def test_finish_takes_the_short_road_and_frees_the_same(database: Database) -> None:
    """A job holding only slots ends through finish_statements (a few UPDATEs); the
    result must equal the general path's: state, reason, exit code, output, ended_at,
    allocation released, slots back, history recorded."""
    from app.db.models import Job, JobEvent, JobEventKind

    _worker(database, "w", slots=2)
    first, second = _submit(database), _submit(database)
    assert _pull(database, "w") == first
    assert _pull(database, "w") == second
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
