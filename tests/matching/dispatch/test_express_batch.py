"""The express batch (app/matching/dispatch/express.py's batch_on_loop, with the
multi-row statements of app/matching/dispatch/batch_sql.py) against the general batch
(app/matching/dispatch/batch.py), the reference implementation, which ends each report
with the general finish and takes each job with the general pull: on generated farms,
the same rows, the same jobs in the same order, the same ends. PostgreSQL only: elsewhere
there is no express way."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from sqlalchemy import select

from app.db.base import utcnow
from app.db.engine import Database
from app.db.event_loop import EventLoopConnections
from app.db.models import Job, JobState, Worker
from app.db.notify import CHANNEL
from app.matching import submission, workers
from app.matching.dispatch import express
from app.matching.dispatch.batch import EndReport, batch_pull
from app.matching.dispatch.batch_sql import TAKE_LIMITS, take_limit
from app.matching.submission import JobSpec
from app.matching.workers import QueueSpec, WorkerSpec
from tests.support.express_rows import on_loop_then_undo, snapshot

pytestmark = pytest.mark.db

#: What the generated workers offer and the jobs ask for (Momotor tags).
_OFFERS = ("os: ?linux", "os: ?linux, ?windows", "os: ?windows; gpu: ?cuda")
_ASKS = ("", "os: linux", "os: windows", "gpu: cuda", "os: linux; gpu: cuda")


@pytest.fixture(autouse=True)
def _postgresql_only(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("the express way is PostgreSQL's (data-modifying CTEs, SKIP LOCKED)")


@dataclass(frozen=True)
class _Report:
    """A batch's report, as the API's FinishedIn carries it."""

    job_id: int
    outcome: str
    reason: str | None
    exit_code: int | None
    output: str | None


def _farm(database: Database, rng: random.Random) -> list[str]:
    """Workers with one to three queues of one to four slots (queue order matters: the
    take of many books on the first open one only while the batch fits it), and forty
    jobs of mixed requests, priorities and slots; the workers' names."""
    names = []
    with database.transaction() as session:
        for number in range(3):
            queues = tuple(
                QueueSpec(name=f"q{index}.q", slots=rng.randint(1, 4))
                for index in range(rng.randint(1, 3))
            )
            name = f"w{number}"
            workers.upsert_worker(
                session, WorkerSpec(name=name, resources=rng.choice(_OFFERS), queues=queues)
            )
            names.append(name)
        for _ in range(40):
            spec = JobSpec(
                resources=rng.choice(_ASKS),
                priority=rng.randint(0, 3),
                slots=rng.choice((1, 1, 1, 2, 3)),
                command=["true"],
            )
            submission.submit_job(session, spec, submitter=rng.choice(("ann", "bob")))
    return names


def _reports(database: Database, name: str, rng: random.Random) -> list[_Report]:
    """Ends of some of the worker's running jobs, in a random order, some failed."""
    with database.transaction(write=False) as session:
        running = list(
            session.scalars(
                select(Job.id)
                .join(Worker, Worker.id == Job.worker_id)
                .where(Worker.name == name, Job.state == JobState.RUNNING)
            )
        )
    rng.shuffle(running)
    ended = running[: rng.randint(0, len(running))]
    return [
        _Report(
            job_id,
            outcome,
            rng.choice((None, "exit 3")),
            rng.choice((None, 0, 3)),
            rng.choice((None, "", "out\n")),
        )
        for job_id in ended
        for outcome in (rng.choice(("finished", "failed")),)
    ]


def _general(
    database: Database, name: str, reports: list[_Report], count: int, *, keep: bool
) -> tuple[Any, Any]:
    """The general batch in a transaction: what it ended and started, and the rows it
    left; rolled back unless ``keep``."""
    with database.transaction() as session:
        savepoint = session.begin_nested()
        done = batch_pull(
            session,
            name,
            [
                EndReport(r.job_id, r.outcome, r.reason, exit_code=r.exit_code, output=r.output)
                for r in reports
            ],
            count,
        )
        session.flush()
        outcome = (
            [(ended.job_id, ended.state, ended.late is not None) for ended in done.ended],
            [job.id for job in done.jobs],
        )
        rows = snapshot(session)
        if keep:
            savepoint.commit()
        else:
            savepoint.rollback()
    return outcome, rows


@pytest.mark.parametrize("seed", range(6))
def test_the_express_batch_ends_and_takes_as_the_general_batch(
    database: Database, seed: int
) -> None:
    """Source: the general batch (app/matching/dispatch/batch.py) is the reference. Each
    round a worker carries the ends of some of its running jobs and asks for 1 to 12
    jobs; the express batch, rolled back, must leave the rows the general one leaves
    and give the same answer (or hand the batch over), and then the general one runs
    for real so that the farm moves on."""
    rng = random.Random(seed)
    names = _farm(database, rng)
    many_taken = 0
    for _ in range(14):
        name = rng.choice(names)
        reports = _reports(database, name, rng)
        count = rng.randint(1, 12)
        done, loop_rows = on_loop_then_undo(
            database,
            lambda transaction, name=name, reports=reports, count=count: express.batch_on_loop(
                transaction, name, reports, count, utcnow()
            ),
        )
        general, general_rows = _general(database, name, reports, count, keep=True)
        if done is None:
            continue  # handed over: the general way decided it, as the lane would
        assert [(job.id, job.state, False) for job in done.ended] == general[0]
        taken = [pulled.job.id for pulled in done.pulls]
        if done.last is not None or taken:
            assert taken == general[1], (name, count)
            assert loop_rows == general_rows
        many_taken += len(taken) > 1
    assert many_taken, "no batch took more than one job: the farms test nothing"


def test_a_batch_that_cannot_be_ended_the_express_way_is_handed_over(database: Database) -> None:
    """A resent report (the job ended already) is the general way's to answer: the
    express batch gives None, and its caller rolls back."""
    (name, *_) = _farm(database, random.Random(7))
    _, started = _general(database, name, [], 3, keep=True)[0]
    assert started, "the worker should have started a job"
    first = _Report(started[0], "finished", None, 0, None)
    _general(database, name, [first], 1, keep=True)
    now = utcnow()
    done, _ = on_loop_then_undo(
        database, lambda transaction: express.batch_on_loop(transaction, name, [first], 2, now)
    )
    assert done is None


def test_every_count_a_batch_may_ask_for_has_its_take() -> None:
    """The takes of many are built for powers of two up to the batch's bound
    (app/matching/dispatch/batch.py's MAX_BATCH): each count has the smallest."""
    from app.matching.dispatch.batch import MAX_BATCH

    assert TAKE_LIMITS[-1] == MAX_BATCH
    for count in range(2, MAX_BATCH + 1):
        limit = take_limit(count)
        assert count <= limit < 2 * count


def test_a_batch_announces_its_room_and_its_jobs_taken_in_one_notification(
    database: Database,
) -> None:
    """Every job a take of many starts is announced taken (``t<category>.<job>``, as
    the single take announces one) and, when the batch's reports ended jobs, the
    worker's room (``r<worker>``, as the single finish announces it): all in one
    notification, sent at the commit."""
    with database.transaction() as session:
        worker, _ = workers.upsert_worker(session, WorkerSpec(name="wide", slots=4))
        worker_id = worker.id
        for _ in range(6):
            submission.submit_job(session, JobSpec(command=["true"]), submitter="t")
    pool = EventLoopConnections.for_database(database)
    if pool is None:
        pytest.skip("behind a transaction pooler the express lane stays in its threads")

    async def batch(reports: list[_Report], count: int) -> Any:
        pool.bind(asyncio.get_running_loop())
        try:
            async with pool.transaction() as transaction:
                return await express.batch_on_loop(transaction, "wide", reports, count, utcnow())
        finally:
            await pool.close()

    def announced(reports: list[_Report], count: int) -> tuple[Any, list[str]]:
        listener = psycopg.connect(
            str(database.engine.url.set(drivername="postgresql")), autocommit=True
        )
        try:
            listener.execute(f"LISTEN {CHANNEL}")
            done = asyncio.run(batch(reports, count))
            payloads = [note.payload for note in listener.notifies(timeout=1, stop_after=2)]
        finally:
            listener.close()
        return done, payloads

    def taken(done: Any) -> list[str]:
        return [f"t{pulled.job.category_id}.{pulled.job.id}" for pulled in done.pulls]

    done, payloads = announced([], 3)
    assert len(done.pulls) == 3
    (payload,) = payloads
    assert sorted(payload.split()) == sorted(taken(done))
    # Many reports and a take of one, then one report (the single end's statement) and
    # a take of many.
    for count, outcome in ((1, "finished"), (2, "failed")):
        reports = [_Report(pulled.job.id, outcome, None, 0, None) for pulled in done.pulls]
        done, payloads = announced(reports, count)
        assert [job.id for job in done.ended] == [end.job_id for end in reports]
        assert len(done.pulls) == count
        (payload,) = payloads
        assert sorted(payload.split()) == sorted([f"r{worker_id}", *taken(done)])
