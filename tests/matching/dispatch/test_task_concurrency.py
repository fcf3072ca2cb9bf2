"""Grid Engine's qsub -tc (qsub(1) of Grid Engine 6.2u5: "-tc max_running_tasks allow
users to limit concurrent array job task execution"): a pull never starts a task of an
array that runs ``task_concurrency`` tasks already, and takes the next best job instead;
the express way hands such a task to the general way, and the explanation says why the
task does not run now."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.api.routes.jobs import job_body, job_out
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import Job
from app.matching import workers
from app.matching.dispatch import express
from app.matching.dispatch import pull as dispatch
from app.matching.readiness import explain_workers
from app.matching.submission import JobSpec
from app.matching.submission.bulk import BulkItem, submit_jobs
from app.matching.workers import WorkerSpec
from tests.matching.dispatch.test_express import _answer, _both_ways

pytestmark = pytest.mark.db


def _farm(database: Database, *, tasks: str = "1-5", limit: int = 2) -> list[int]:
    """Workers with room for everything; an array of priority 5 limited to ``limit``
    running tasks, and a plain job of priority 1: the ids of the array's tasks, then the
    plain job's."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w1", resources="", slots=10))
        workers.upsert_worker(session, WorkerSpec(name="w2", resources="", slots=10))
        stored = submit_jobs(
            session,
            [
                BulkItem(JobSpec(priority=5, command=["true"]), "1-5", limit),
                BulkItem(JobSpec(priority=1, command=["true"])),
            ],
            submitter="t",
            max_tasks=100,
        )
    return [job.id for job in stored]


def _pull(database: Database, worker: str) -> int | None:
    with database.transaction() as session:
        job = dispatch.pull(session, worker)
        return None if job is None else job.id


def test_a_full_array_gives_way_to_the_next_best_job(database: Database) -> None:
    *tasks, plain = _farm(database)
    assert _pull(database, "w1") == tasks[0]
    assert _pull(database, "w2") == tasks[1]
    # Two tasks run: the array is full, the plain job of lower priority goes first.
    assert _pull(database, "w1") == plain
    assert _pull(database, "w2") is None
    with database.transaction() as session:
        dispatch.finish(session, tasks[0], "w1", "finished")
    assert _pull(database, "w2") == tasks[2]
    assert _pull(database, "w1") is None


def test_an_array_without_a_limit_runs_every_task(database: Database) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w1", resources="", slots=10))
        stored = submit_jobs(session, [BulkItem(JobSpec(), "1-4")], submitter="t", max_tasks=10)
    assert [_pull(database, "w1") for _ in range(5)] == [j.id for j in stored] + [None]


def test_the_express_way_hands_a_limited_task_over_and_agrees_after(database: Database) -> None:
    """Source: the general way (app/matching/dispatch/pull.py) is the reference, as in
    tests/matching/dispatch/test_express.py."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("the express way is PostgreSQL's")
    *tasks, plain = _farm(database, limit=1)
    with database.transaction() as session:
        # The best head is a task of an array with a limit: the general way decides.
        assert express.pull(session.connection(), "w1", utcnow()) is None
    assert _pull(database, "w1") == tasks[0]
    for name in ("w2", "w1"):
        with database.transaction() as session:
            pulled, general = _both_ways(
                session,
                lambda name=name: express.pull(session.connection(), name, utcnow()),
                lambda name=name: dispatch.pull(session, name),
            )
            if general is None:
                assert pulled.job is None
                continue
            # The array is full: the heads leave it out, and the plain job is plain.
            assert pulled.job is not None and general.id == plain
            assert _answer(job_body(pulled.job, name)) == _answer(
                job_out(session, general, worker_name=name)
            )


def test_the_explanation_says_a_held_back_task_cannot_run_now(database: Database) -> None:
    *tasks, _plain = _farm(database, limit=1)
    assert _pull(database, "w1") == tasks[0]
    with database.transaction() as session:
        job = session.get(Job, tasks[1])
        assert job is not None
        verdicts, summary = explain_workers(session, job, None, "first", [])
        assert [v.can_run_now for v in verdicts] == [False, False]
        assert {v.reason for v in verdicts} == {"task-concurrency"}
        assert summary is not None and summary.can_run_now == 0
        assert dispatch.would_start(session, "w2", tasks[1]) is False


def test_concurrent_pulls_never_exceed_the_limit(database: Database) -> None:
    """Two pulls that both saw the array with room: the second waits for the first's
    lock on the array, counts again, and takes the plain job instead."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("SQLite serialises pulls with BEGIN IMMEDIATE")
    *tasks, plain = _farm(database, limit=1)
    taken: dict[str, Any] = {}
    first = database.transaction()
    session: Session = first.__enter__()
    try:
        taken["w1"] = dispatch.pull(session, "w1").id  # type: ignore[union-attr]

        def second() -> None:
            taken["w2"] = _pull(database, "w2")

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive(), "the second pull waits for the array's lock"
    finally:
        first.__exit__(None, None, None)
    thread.join(timeout=30)
    assert taken == {"w1": tasks[0], "w2": plain}
    with database.transaction() as session:
        running = session.execute(
            text("SELECT count(*) FROM jobs WHERE array_id IS NOT NULL AND state = 'running'")
        ).scalar()
        assert running == 1


def test_a_scheduling_run_starts_no_more_tasks_than_the_limit(database: Database) -> None:
    """POST /v1/schedule (a Grid Engine scheduling run) counts each array's room down as it
    starts tasks, and starts the next job in order instead."""
    from app.matching.gridengine.run import schedule

    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="w1", resources="", slots=10))
        stored = submit_jobs(
            session,
            [
                BulkItem(JobSpec(priority=5, queue_list="default"), "1-5", 2),
                BulkItem(JobSpec(priority=1, queue_list="default")),
            ],
            submitter="t",
            max_tasks=100,
        )
    with database.transaction() as session:
        report = schedule(session)
        assert report.dispatched == 3
    with database.transaction() as session:
        states = {
            row[0]: row[1]
            for row in session.execute(text("SELECT id, state FROM jobs ORDER BY id"))
        }
    ids = [job.id for job in stored]
    assert [states[i] for i in ids] == ["running"] * 2 + ["waiting"] * 3 + ["running"]
