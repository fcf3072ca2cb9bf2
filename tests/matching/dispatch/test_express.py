"""The express pull and finish (app/matching/dispatch/express.py) against the general way,
the reference implementation: on the same rows, each step is run both ways, one after the
other in savepoints, and must take the same job, write the same rows and give the same
answer; what the express way cannot decide it hands over before writing anything that
stays. PostgreSQL only: elsewhere there is no express way."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.api.routes.jobs import job_body, job_out
from app.db.base import utcnow
from app.db.engine import Database
from app.matching import submission, workers
from app.matching.dispatch import express
from app.matching.dispatch import pull as dispatch
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.values import Target
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from tests.support.express_rows import express_then_undo, on_loop_then_undo, snapshot

pytestmark = pytest.mark.db

#: Fields of a job's answer that carry the time of the step.
_TIMES = {"started_at", "ended_at"}


@pytest.fixture(autouse=True)
def _postgresql_only(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("the express way is PostgreSQL's (data-modifying CTEs, SKIP LOCKED)")


def _both_ways(
    session: Session, express_way: Callable[[], Any], general_way: Callable[[], Any]
) -> tuple[Any, Any]:
    """Run the express way in a savepoint rolled back, then the general way in one kept;
    their answers, once the rows each left were found equal."""
    savepoint = session.begin_nested()
    expressed = express_way()
    after_express = snapshot(session)
    savepoint.rollback()
    general = general_way()
    session.flush()
    assert snapshot(session) == after_express
    return expressed, general


def _answer(body: Any) -> dict[str, Any]:
    return {key: value for key, value in body.model_dump().items() if key not in _TIMES}


def _farm(database: Database) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="linux", resources="os: ?linux", slots=2))
        workers.upsert_worker(
            session, WorkerSpec(name="both", resources="os: ?linux, ?windows", slots=3)
        )
        workers.upsert_worker(session, WorkerSpec(name="idle", resources="os: ?beos", slots=1))
        for resources, priority, slots in (
            ("os: linux", 0, 1),
            ("os: windows", 5, 1),
            ("os: linux", 9, 2),
            ("os: windows", 0, 2),
            ("", 1, 1),
        ):
            spec = JobSpec(resources=resources, priority=priority, slots=slots, command=["true"])
            submission.submit_job(session, spec, submitter="t")


def test_every_pull_and_finish_of_a_small_farm_goes_both_ways_alike(database: Database) -> None:
    """Source: the general way (app/matching/dispatch/pull.py) is the reference."""
    _farm(database)
    running: list[tuple[int, str]] = []
    for name in ("linux", "both", "idle", "both", "linux", "both", "linux"):
        with database.transaction() as session:
            pulled, general = _both_ways(
                session,
                lambda name=name: express.pull(session.connection(), name, utcnow()),
                lambda name=name: dispatch.pull(session, name),
            )
            if general is None:
                assert pulled.job is None, name
                continue
            assert pulled.job is not None, name
            assert _answer(job_body(pulled.job, name)) == _answer(
                job_out(session, general, worker_name=name)
            )
            running.append((general.id, name))
    assert len(running) >= 4
    for number, (job_id, name) in enumerate(running):
        outcome = "failed" if number % 2 else "finished"
        reason = "exit 3" if outcome == "failed" else None
        with database.transaction() as session:
            ended, general = _both_ways(
                session,
                lambda job_id=job_id, name=name, outcome=outcome, reason=reason: express.finish(
                    session.connection(), job_id, name, _report(outcome, reason), utcnow()
                ),
                lambda job_id=job_id, name=name, outcome=outcome, reason=reason: dispatch.finish(
                    session, job_id, name, outcome, reason, exit_code=3, output="out\n"
                ),
            )
            assert _answer(job_body(ended, name)) == _answer(
                job_out(session, general, worker_name=name)
            )


def _report(outcome: str, reason: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(outcome=outcome, reason=reason, exit_code=3, output="out\n")


def test_what_the_express_way_cannot_decide_the_general_way_does(database: Database) -> None:
    """None, having written nothing but the worker's last_seen: the caller commits (a
    rollback would cost the connection its prepared statements) and goes the general
    way."""
    _farm(database)
    with database.transaction() as session:
        connection = session.connection()
        assert express.pull(connection, "nobody", utcnow()) is None
        job = dispatch.pull(session, "linux")
        assert job is not None
        before = snapshot(session)
        for worker, report, job_id in (
            ("both", _report("finished"), job.id),  # another worker's job
            ("linux", _report("cancelled"), job.id),  # not an outcome
            ("linux", _report("finished"), 10**9),  # no such job
            ("nobody", _report("finished"), job.id),  # no such worker
        ):
            assert express.finish(connection, job_id, worker, report, utcnow()) is None
        assert snapshot(session) == before
        dispatch.finish(session, job.id, "linux", "finished")
        # A resend of the report: the general way answers it as the first.
        assert express.finish(connection, job.id, "linux", _report("finished"), utcnow()) is None


def test_a_grid_engine_worker_is_left_to_the_general_way(database: Database) -> None:
    _farm(database)
    with database.transaction() as session:
        worker_id = session.execute(text("SELECT id FROM workers WHERE name = 'linux'")).scalar()
        set_values(session, Target("host", worker_id), "load_values", {"arch": "lx-amd64"})
        submission.submit_job(session, JobSpec(hard="arch=lx-amd64", priority=20), submitter="t")
    with database.transaction() as session:
        assert express.pull(session.connection(), "linux", utcnow()) is None
        job = dispatch.pull(session, "linux")
        assert job is not None and job.hard is not None
    # Its end goes the express way, announcing it to every waiter as the general way does.
    with database.transaction() as session:
        ended, general = _both_ways(
            session,
            lambda: express.finish(
                session.connection(), job.id, "linux", _report("finished"), utcnow()
            ),
            lambda: dispatch.finish(
                session, job.id, "linux", "finished", exit_code=3, output="out\n"
            ),
        )
        assert ended is not None and ended.state.value == general.state.value == "finished"


def test_another_workers_placed_job_leaves_a_puller_to_the_express_way(database: Database) -> None:
    """A job the scheduler placed on one worker, not yet received, is that worker's to
    deliver. The take by name read it as every worker's (its subquery in FROM was not
    correlated with the worker), so one placed job anywhere sent every pull the general
    way."""
    _farm(database)
    with database.transaction() as session:
        job = dispatch.pull(session, "both")
        assert job is not None
        session.execute(
            text("UPDATE jobs SET awaiting_pickup = true WHERE id = :id"), {"id": job.id}
        )
    with database.transaction() as session:
        pulled = express.pull(session.connection(), "linux", utcnow())
        assert pulled is not None and pulled.job is not None
        assert not pulled.puller.placed_waiting
        # The worker the job was placed on still goes the general way, which delivers it.
        assert express.pull(session.connection(), "both", utcnow()) is None


def test_a_worker_without_room_is_answered_without_a_job(database: Database) -> None:
    _farm(database)
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="linux", resources="os: ?linux", slots=1))
        assert dispatch.pull(session, "linux") is not None  # its one slot taken
    with database.transaction() as session:
        pulled = express.pull(session.connection(), "linux", utcnow())
        assert pulled.job is None and pulled.puller.max_free == 0


def test_a_worker_with_an_inventory_takes_the_same_job_both_ways(database: Database) -> None:
    """The take sent with the lock serves workers without an inventory only; for one with
    an inventory the lock says so, and the take by id follows in a second round trip."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="node", slots=2, inventory="node/core=4"))
        for priority in (0, 3):
            spec = JobSpec(resources="", priority=priority, slots=1, command=["true"])
            submission.submit_job(session, spec, submitter="t")
    with database.transaction() as session:
        pulled, general = _both_ways(
            session,
            lambda: express.pull(session.connection(), "node", utcnow()),
            lambda: dispatch.pull(session, "node"),
        )
        assert pulled is not None and pulled.puller.managed
        assert pulled.job is not None and general is not None
        assert _answer(job_body(pulled.job, "node")) == _answer(
            job_out(session, general, worker_name="node")
        )


def test_the_event_loops_way_takes_and_ends_as_the_threads_way(database: Database) -> None:
    """pull_on_loop and finish_on_loop (psycopg's asyncio connection, the express lane's
    way on PostgreSQL) against pull and finish on a Core connection: the same job, the
    same rows, the same answer, for a plain worker and for one with an inventory (its take
    by id in a second round trip)."""
    _farm(database)
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="node", slots=2, inventory="node/core=4"))
        for priority in (0, 3):
            spec = JobSpec(resources="", priority=priority, slots=1, command=["true"])
            submission.submit_job(session, spec, submitter="t")
    now = utcnow()
    for name in ("linux", "node"):
        threads, threads_rows = express_then_undo(
            database, lambda connection, name=name: express.pull(connection, name, now)
        )
        loop, loop_rows = on_loop_then_undo(
            database,
            lambda transaction, name=name: express.pull_on_loop(transaction, name, now),
        )
        assert threads is not None and loop is not None and threads.job is not None
        assert loop.puller == threads.puller
        assert _answer(job_body(loop.job, name)) == _answer(job_body(threads.job, name))
        assert loop_rows == threads_rows
    with database.transaction() as session:
        running = dispatch.pull(session, "linux")
        assert running is not None
    report = SimpleNamespace(outcome="failed", reason="boom", exit_code=3, output="out")
    threads, threads_rows = express_then_undo(
        database, lambda connection: express.finish(connection, running.id, "linux", report, now)
    )
    loop, loop_rows = on_loop_then_undo(
        database,
        lambda transaction: express.finish_on_loop(transaction, running.id, "linux", report, now),
    )
    assert threads is not None and loop is not None
    assert _answer(job_body(loop, "linux")) == _answer(job_body(threads, "linux"))
    assert loop_rows == threads_rows
