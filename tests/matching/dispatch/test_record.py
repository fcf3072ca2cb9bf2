"""Jobs placed by the scheduler reach their worker (issue 22,
app/matching/dispatch/record.py).

A placement by POST /v1/schedule (app/matching/gridengine/run.py) or POST
/v1/jobs/{id}/allocate (app/matching/allocation/allocate.py) counts as a dispatch: one
attempt, a ``dispatched`` event naming the worker and the scheduler, a lease that runs
from the placement. The worker's next pull delivers it before any other work, without a
second attempt; a worker that never pulls loses it at the lease sweep, and the attempts
limit ends the loop with a failure that says why.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Job, JobEvent, JobEventKind, JobState, QueueInstance, Worker
from app.matching import history, leases, submission, workers
from app.matching.allocation import allocate
from app.matching.dispatch import pull as dispatch
from app.matching.dispatch.record import PLACED_BY_SCHEDULER
from app.matching.gridengine.run import schedule
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

LEASE = timedelta(minutes=5)


def _submit(database: Database, spec: JobSpec | None = None) -> int:
    with database.transaction() as session:
        return submission.submit_job(session, spec or JobSpec(), submitter="t").id


def _job(database: Database, job_id: int) -> Job:
    with database.transaction(write=False) as session:
        job = session.get(Job, job_id)
        assert job is not None
        session.expunge(job)
        return job


def _events(database: Database, job_id: int) -> list[tuple[JobEventKind, str | None, str | None]]:
    with database.transaction(write=False) as session:
        return [(e.kind, e.worker, e.detail) for e in history.events(session, job_id)]


def _schedule(database: Database) -> int:
    with database.transaction() as session:
        return schedule(session).dispatched


def _pull(database: Database, name: str) -> tuple[int | None, bool]:
    """The job the worker's pull gave (or None) and whether it was a delivery."""
    with database.transaction() as session:
        job, puller = dispatch.pull_for(session, name)
        return (None if job is None else job.id), puller.placed_waiting


def _sweep(database: Database, after: timedelta, max_attempts: int = 3) -> list[int]:
    with database.transaction() as session:
        expired = leases.expire_leases(
            session, lease=LEASE, max_attempts=max_attempts, now=utcnow() + after
        )
        return [lease.job_id for lease in expired]


def _one_worker(database: Database, name: str = "w1", slots: int = 2) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name=name, slots=slots))


def test_a_scheduling_run_counts_each_placement_as_a_dispatch(database: Database) -> None:
    _one_worker(database)
    job_id = _submit(database)
    assert _schedule(database) == 1
    job = _job(database, job_id)
    assert (job.state, job.attempts, job.awaiting_pickup) == (JobState.RUNNING, 1, True)
    assert job.started_at is not None
    assert _events(database, job_id)[1:] == [
        (JobEventKind.DISPATCHED, "w1", f"attempt 1, {PLACED_BY_SCHEDULER}")
    ]


def test_the_next_pull_delivers_the_placed_job_first_and_once(database: Database) -> None:
    _one_worker(database)
    placed = _submit(database)
    assert _schedule(database) == 1
    # A better job submitted after the placement: the placed job still goes first.
    better = _submit(database, JobSpec(priority=10))
    assert _pull(database, "w1") == (placed, True)
    job = _job(database, placed)
    assert (job.state, job.attempts, job.awaiting_pickup) == (JobState.RUNNING, 1, False)
    # Delivered once: the next pull takes new work, counted as its own dispatch.
    assert _pull(database, "w1") == (better, False)
    assert _job(database, better).attempts == 1
    kinds = [kind for kind, _worker, _detail in _events(database, placed)]
    assert kinds == [JobEventKind.SUBMITTED, JobEventKind.DISPATCHED]


def test_a_delivered_job_keeps_its_lease_by_the_workers_word(database: Database) -> None:
    _one_worker(database)
    job_id = _submit(database)
    _schedule(database)
    assert _pull(database, "w1") == (job_id, True)
    with database.transaction() as session:
        leases.heartbeat(session, "w1").last_seen = utcnow() + LEASE
    assert _sweep(database, after=LEASE + timedelta(seconds=5)) == []


def test_a_placed_job_never_picked_up_is_requeued_after_the_lease(database: Database) -> None:
    _one_worker(database)
    job_id = _submit(database)
    _schedule(database)
    # Heartbeats say nothing about a job the worker does not know of: the lease runs from
    # the placement, not from the worker's last word.
    with database.transaction() as session:
        leases.heartbeat(session, "w1").last_seen = utcnow() + LEASE
    assert _sweep(database, after=LEASE - timedelta(seconds=5)) == []
    assert _sweep(database, after=LEASE + timedelta(seconds=5)) == [job_id]
    job = _job(database, job_id)
    assert (job.state, job.worker_id, job.attempts, job.awaiting_pickup) == (
        JobState.WAITING,
        None,
        1,
        False,
    )
    kind, worker, detail = _events(database, job_id)[-1]
    assert (kind, worker) == (JobEventKind.REQUEUED, "w1")
    assert detail is not None and "placed on w1 by the scheduler" in detail
    assert "never picked up" in detail
    with database.transaction(write=False) as session:
        assert all(qi.used_slots == 0 for qi in session.scalars(select(QueueInstance)))
    # Requeued, it is nobody's delivery any more: a pull takes it as new work.
    assert _pull(database, "w1") == (job_id, False)
    assert _job(database, job_id).attempts == 2


def test_the_attempts_limit_ends_the_placement_loop(database: Database) -> None:
    """The loop of the issue: placed, never picked up, requeued, placed again... The
    third placement's expiry fails the job (JOBMATCH_MAX_ATTEMPTS=3)."""
    _one_worker(database)
    job_id = _submit(database)
    for round_ in range(1, 4):
        assert _schedule(database) == 1
        assert _job(database, job_id).attempts == round_
        assert _sweep(database, after=LEASE + timedelta(seconds=5)) == [job_id]
    job = _job(database, job_id)
    assert job.state is JobState.FAILED
    assert job.failure_reason is not None
    assert "placed on w1 by the scheduler" in job.failure_reason
    assert "never picked up" in job.failure_reason
    assert "3 attempts used" in job.failure_reason
    kinds = [kind for kind, _worker, _detail in _events(database, job_id)]
    assert kinds.count(JobEventKind.DISPATCHED) == 3
    assert kinds[-1] is JobEventKind.FAILED
    assert _schedule(database) == 0


def test_an_allocation_is_a_dispatch_its_leader_receives(database: Database) -> None:
    """POST /v1/jobs/{id}/allocate: a two-node job (RFC 14 ``node=2``) on two inventory
    workers; the first node is the job's worker and receives it on its next pull."""
    with database.transaction() as session:
        for name in ("n1", "n2"):
            workers.upsert_worker(session, WorkerSpec(name=name, slots=1, inventory="node/core=4"))
    job_id = _submit(database, JobSpec(shape="node=2/slot/core=2"))
    with database.transaction() as session:
        job = allocate.schedule_job(session, job_id, "first")
        assert (job.attempts, job.awaiting_pickup) == (1, True)
        leader = session.scalar(select(Worker.name).where(Worker.id == job.worker_id))
    assert leader is not None
    assert _events(database, job_id)[1:] == [
        (JobEventKind.DISPATCHED, leader, f"attempt 1, {PLACED_BY_SCHEDULER}")
    ]
    other = "n2" if leader == "n1" else "n1"
    assert _pull(database, other) == (None, False)
    assert _pull(database, leader) == (job_id, True)
    with database.transaction(write=False) as session:
        dispatched = session.scalars(
            select(JobEvent).where(
                JobEvent.job_id == job_id, JobEvent.kind == JobEventKind.DISPATCHED
            )
        ).all()
        assert len(dispatched) == 1
    assert _job(database, job_id).attempts == 1
