"""Cancelling a running job takes the lock of its worker before the lock of the job, as
finish and pull do (worker -> job -> queue instances -> inventory rows): the other order
could deadlock with a finish of the same job on PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import select, text

from app.db.engine import Database
from app.db.models import Job, JobState, Worker
from app.matching import submission, workers
from app.matching.allocation import allocate as scheduling
from app.matching.dispatch import pull as dispatch
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec

#: Seconds the test waits for the cancel to block on the worker lock.
WAIT_SECONDS = 10.0


def _running_job(database: Database) -> tuple[int, int]:
    with database.transaction() as session:
        worker, _ = workers.upsert_worker(
            session, WorkerSpec(name="w", slots=2, inventory="node/core=4")
        )
        submission.submit_job(session, JobSpec(shape="slot/core=2"), submitter="t")
    with database.transaction() as session:
        job = dispatch.pull(session, "w")
        assert job is not None
        return job.id, worker.id


def test_cancel_of_a_running_job_frees_it(database: Database) -> None:
    job_id, _ = _running_job(database)
    with database.transaction() as session:
        assert submission.cancel_job(session, job_id).state is JobState.CANCELLED
    with database.transaction(write=False) as session:
        assert session.scalar(text("SELECT free FROM inventory_counts WHERE type = 'core'")) == 4


def test_cancel_locks_the_worker_before_the_job(database: Database, backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite serialises writers at BEGIN; there are no row locks to order")
    job_id, worker_id = _running_job(database)
    outcome: list[object] = []

    def cancel() -> None:
        try:
            with database.transaction() as session:
                outcome.append(submission.cancel_job(session, job_id).state)
        except Exception as error:  # reported to the test thread below
            outcome.append(error)

    with database.transaction() as holder:
        holder.execute(select(Worker.id).where(Worker.id == worker_id).with_for_update())
        thread = threading.Thread(target=cancel)
        thread.start()
        deadline = time.monotonic() + WAIT_SECONDS
        waiting = 0
        while time.monotonic() < deadline and not waiting:
            time.sleep(0.05)
            with database.transaction(write=False) as probe:
                waiting = (
                    probe.scalar(
                        text(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                        )
                    )
                    or 0
                )
        assert waiting == 1, "the cancel never waited for the worker lock"
        # While the cancel waits for the worker, the job row is not locked yet.
        with database.transaction() as other:
            locked = other.scalar(
                select(Job.id).where(Job.id == job_id).with_for_update(nowait=True)
            )
            assert locked == job_id
    thread.join(WAIT_SECONDS)
    assert outcome == [JobState.CANCELLED]


def _two_node_job(database: Database) -> tuple[int, Worker, Worker]:
    """A running job on two workers, placed by the scheduler (POST /v1/jobs/{id}/allocate's
    service) and delivered to its first node, which reports its end: (job id, that
    reporting worker, the other worker)."""
    with database.transaction() as session:
        for name in ("n1", "n2"):
            workers.upsert_worker(session, WorkerSpec(name=name, slots=2, inventory="node/core=4"))
        busy = submission.submit_job(session, JobSpec(shape="slot/core=1"), submitter="t")
    with database.transaction() as session:
        taken = dispatch.pull(session, "n2")
        assert taken is not None and taken.id == busy.id
        job = submission.submit_job(session, JobSpec(shape="node=2/slot/core=1"), submitter="t")
    with database.transaction() as session:
        # Packing puts the first node, which reports the end, on the busier n2: the
        # worker with the larger id, so that id order and "reporter first" differ.
        placed = scheduling.schedule_job(session, job.id, "pack")
        reporter = session.get(Worker, placed.worker_id)
        assert reporter is not None
        other = session.scalar(select(Worker).where(Worker.id != reporter.id))
        assert other is not None and other.id < reporter.id, "the reporter must come second"
        session.expunge_all()
    with database.transaction() as session:
        delivered = dispatch.pull(session, reporter.name)
        assert delivered is not None and delivered.id == job.id
    return job.id, reporter, other


def _waiters(database: Database) -> int:
    with database.transaction(write=False) as probe:
        return int(
            probe.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            )
            or 0
        )


def test_a_multi_node_finish_locks_its_workers_in_id_order(
    database: Database, backend: str
) -> None:
    """A job on workers 1 and 2 reported from 2 must lock 1 before 2, as every other
    multi-worker writer does: locking its reporter first and the rest after let two such
    finishes, reported from opposite ends, wait for each other (a deadlock seen through
    PgBouncer in tests/matching/allocation/test_concurrency.py). While the finish waits
    for the other worker, its own row must still be free."""
    if backend != "postgresql":
        pytest.skip("SQLite serialises writers at BEGIN; there are no row locks to order")
    job_id, reporter, other = _two_node_job(database)
    first, second = sorted((reporter, other), key=lambda w: w.id)
    outcome: list[object] = []

    def finish() -> None:
        try:
            with database.transaction() as session:
                ended = dispatch.finish(session, job_id, reporter.name, "finished")
                outcome.append(ended.state)
        except Exception as error:  # reported to the test thread below
            outcome.append(error)

    with database.transaction() as holder:
        holder.execute(select(Worker.id).where(Worker.id == first.id).with_for_update())
        thread = threading.Thread(target=finish)
        thread.start()
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline and not _waiters(database):
            time.sleep(0.05)
        assert _waiters(database) == 1, "the finish never waited for the first worker"
        with database.transaction() as probe:
            free = probe.scalar(
                select(Worker.id).where(Worker.id == second.id).with_for_update(nowait=True)
            )
            assert free == second.id
    thread.join(WAIT_SECONDS)
    assert outcome == [JobState.FINISHED]
