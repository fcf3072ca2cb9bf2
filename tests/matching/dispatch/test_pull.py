"""Pull-mode dispatch (app/matching/dispatch/pull.py, pull): the order in which a worker gets
jobs, which jobs it may get, and the slots a pull books."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Allocation, JobState, QueueInstance
from app.matching.dispatch import pull as dispatch
from app.wire.queues import QueueSpec
from tests.support.announcements import listening
from tests.support.pulls import add_worker, pull_job, submit_job
from tests.support.statements import statements_sent


def test_highest_priority_then_oldest(database: Database) -> None:
    add_worker(database, "w", slots=10)
    old_low = submit_job(database, priority=0)
    high = submit_job(database, priority=5)
    new_low = submit_job(database, priority=0)
    high_other_category = submit_job(database, "a: ?x", priority=5)
    assert [pull_job(database, "w") for _ in range(4)] == [
        high,
        high_other_category,
        old_low,
        new_low,
    ]
    assert pull_job(database, "w") is None


def test_worker_gets_only_what_it_can_run(database: Database) -> None:
    """debusine issue #8: a pulling worker gets the oldest job it *can* run."""
    add_worker(database, "javaonly", "language: java", slots=5)
    add_worker(database, "pyonly", "language: python", slots=5)
    py_job = submit_job(database, "language: python")
    java_job = submit_job(database, "language: java")
    assert pull_job(database, "javaonly") == java_job
    assert pull_job(database, "javaonly") is None
    assert pull_job(database, "pyonly") == py_job


def test_slots_are_booked_and_freed(database: Database) -> None:
    add_worker(database, "w", slots=3)
    two = submit_job(database, slots=2)
    also_two = submit_job(database, slots=2)
    one = submit_job(database, slots=1)
    assert pull_job(database, "w") == two
    # The next job in order needs 2 slots but only 1 is free: the 1-slot job goes first.
    assert pull_job(database, "w") == one
    assert pull_job(database, "w") is None
    with database.transaction() as session:
        assert session.scalar(select(QueueInstance.used_slots)) == 3
        dispatch.finish(session, two, "w", "finished")
        assert session.scalar(select(QueueInstance.used_slots)) == 1
    assert pull_job(database, "w") == also_two


def test_draining_and_offline_workers_get_nothing(database: Database) -> None:
    from app.db.models import WorkerState

    add_worker(database, "d", state=WorkerState.DRAINING)
    add_worker(database, "o", state=WorkerState.OFFLINE)
    submit_job(database)
    assert pull_job(database, "d") is None
    assert pull_job(database, "o") is None


def test_queue_order_picks_the_queue_instance(database: Database) -> None:
    add_worker(database, "w", queues=(QueueSpec("fast", 1), QueueSpec("slow", 2)))
    jobs = [submit_job(database) for _ in range(4)]
    assert [pull_job(database, "w") for _ in range(4)] == [*jobs[:3], None]
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
    from app.matching.dispatch.pull_plain import claim_plain_job
    from app.matching.dispatch.puller import Puller, lock_puller

    add_worker(database, "w", slots=1)
    running = submit_job(database)
    assert pull_job(database, "w") == running
    waiting = submit_job(database)
    with database.transaction() as session:
        now = datetime.now(UTC)
        puller = lock_puller(session, "w", now)
        assert puller is not None and puller.max_free == 0
        # As if the count had been read before the other pull booked the last slot.
        stale = Puller(**{**puller.__dict__, "max_free": 1})
        claimed, job = claim_plain_job(session, waiting, stale, now)
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


def test_a_plain_pull_is_two_statements_on_postgresql(database: Database) -> None:
    """Issue 23: the worker's lock, then the heads, the claim, the booking and the record
    in one statement; the lock is its own statement so that the second reads after it."""
    if database.dialect_name != "postgresql":
        pytest.skip("data-modifying CTEs and SKIP LOCKED are PostgreSQL's")
    add_worker(database, "w", slots=2)
    low = submit_job(database, priority=0)
    high = submit_job(database, "a: ?x", priority=3)
    with database.transaction() as session, statements_sent(database.engine) as sent:
        job = dispatch.pull(session, "w")
    assert [statement.split()[0] for statement in sent] == ["UPDATE", "WITH"]
    assert job is not None and (job.id, job.state, job.attempts) == (high, JobState.RUNNING, 1)
    with database.transaction() as session, statements_sent(database.engine) as sent:
        assert dispatch.pull(session, "w") is not None
        assert dispatch.pull(session, "w") is None  # no room: the lock says so
    assert len(sent) == 3
    with database.transaction() as session:
        booked = session.scalars(select(Allocation.job_id).order_by(Allocation.id)).all()
        assert booked == [high, low]
        assert session.scalar(select(QueueInstance.used_slots)) == 2
    # The statement announced the job taken itself: every listening process hears it once
    # the pull commits, and the commit sent no pg_notify of its own.
    add_worker(database, "w", slots=3)
    submit_job(database, "a: ?x")
    with listening(database) as heard:
        with database.transaction() as session, statements_sent(database.engine) as sent:
            job = dispatch.pull(session, "w")
        assert job is not None
        assert heard.wait_for(f"t{job.category_id}.{job.id}")
    assert not any("pg_notify(%(channel)s" in statement for statement in sent)
