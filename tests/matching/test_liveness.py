"""Liveness (issue 35): a worker not heard from for JOBMATCH_WORKER_TIMEOUT_SECONDS is
marked ``unknown`` by one UPDATE per sweep, as Grid Engine's qmaster shows a host whose
execd went silent (qhost(1) and qstat(1) -f: state ``u``, unknown). It is no candidate,
explain says why, its running jobs keep their leases, a word from it makes it active
again, and what an admin set is never overridden either way."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from app.api.lease_sweeper import LeaseSweeper
from app.db.base import utcnow
from app.db.engine import Database
from app.db.event_loop import EventLoopConnections
from app.db.models import Allocation, JobState, QueueInstance, Worker, WorkerState
from app.matching import candidates, leases, liveness, submission, workers
from app.matching.debusine.metadata import report_dynamic_metadata
from app.matching.dispatch import express
from app.matching.dispatch import pull as dispatch
from app.matching.errors import InvalidFieldError
from app.matching.readiness import DYNAMIC_REASONS, explain_workers
from app.matching.submission import JobSpec
from app.matching.worker_lifecycle import WorkerChanges, update_worker
from app.matching.workers import WorkerSpec
from app.settings import Settings

pytestmark = pytest.mark.db

TIMEOUT = 600.0


def _later(seconds: float) -> datetime:
    return utcnow() + timedelta(seconds=seconds)


def _mark(database: Database, after: float) -> list[str]:
    """The sweep's marking as if ``after`` seconds had passed; the names it marked."""
    with database.transaction() as session:
        marked = liveness.mark_silent(session, timeout_seconds=TIMEOUT, now=_later(after))
    return [m.worker for m in marked]


def _state(database: Database, name: str) -> Worker:
    with database.transaction(write=False) as session:
        worker = session.scalars(select(Worker).where(Worker.name == name)).one()
        session.expunge(worker)
        return worker


def _register(database: Database, *names: str, state: WorkerState = WorkerState.ACTIVE) -> None:
    with database.transaction() as session:
        for name in names:
            workers.upsert_worker(session, WorkerSpec(name=name, slots=2, state=state))


def test_a_silent_worker_is_unknown_as_grid_engine_shows_a_host_whose_execd_went_silent(
    database: Database,
) -> None:
    """Grid Engine (qhost(1), qstat(1) -f): a host whose execd stopped reporting for
    longer than the qmaster's load report timeout is shown in state ``u``. Here a worker
    silent past the timeout is ``unknown``, said by the server, with why; one that
    spoke (a heartbeat) within it stays active. Marking is idempotent."""
    _register(database, "silent", "spoke")
    with database.transaction() as session:
        leases.heartbeat(session, "spoke").last_seen = _later(TIMEOUT - 60)
    assert _mark(database, after=TIMEOUT - 5) == []
    assert _mark(database, after=TIMEOUT + 5) == ["silent"]
    assert _mark(database, after=TIMEOUT + 5) == [], "an UPDATE with a WHERE marks once"
    silent = _state(database, "silent")
    assert silent.state is WorkerState.UNKNOWN
    assert silent.state_set_by == liveness.SERVER == "jobmatch"
    assert silent.state_reason == "not heard from for more than 600 s"
    assert silent.state_changed_at is not None
    assert _state(database, "spoke").state is WorkerState.ACTIVE


def test_a_worker_never_heard_from_counts_its_silence_from_its_registration(
    database: Database,
) -> None:
    _register(database, "new")
    registered = _state(database, "new")
    assert registered.last_seen is None
    with database.transaction() as session:
        early = registered.created_at + timedelta(seconds=TIMEOUT - 1)
        assert liveness.mark_silent(session, timeout_seconds=TIMEOUT, now=early) == []
    with database.transaction() as session:
        late = registered.created_at + timedelta(seconds=TIMEOUT + 1)
        (marked,) = liveness.mark_silent(session, timeout_seconds=TIMEOUT, now=late)
    assert (marked.worker, marked.last_seen) == ("new", None)


def test_what_an_admin_set_is_never_marked_nor_undone(database: Database) -> None:
    """Only active workers are marked, and a word ends only ``unknown``: a drained,
    disabled or offline worker stays so through silence and speech."""
    for state in (WorkerState.DRAINING, WorkerState.DISABLED, WorkerState.OFFLINE):
        _register(database, state.value, state=state)
    assert _mark(database, after=TIMEOUT * 10) == []
    with database.transaction() as session:
        for state in (WorkerState.DRAINING, WorkerState.DISABLED, WorkerState.OFFLINE):
            leases.heartbeat(session, state.value)
    for state in (WorkerState.DRAINING, WorkerState.DISABLED, WorkerState.OFFLINE):
        worker = _state(database, state.value)
        assert worker.state is state and worker.last_seen is not None


def test_nobody_sets_unknown_but_the_server(database: Database) -> None:
    _register(database, "w")
    with database.transaction() as session, pytest.raises(InvalidFieldError, match="unknown"):
        update_worker(session, "w", WorkerChanges(state=WorkerState.UNKNOWN), by="admin")
    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    with database.transaction() as session:
        # A change of other fields keeps the state; drain is an admin's to give.
        update_worker(session, "w", WorkerChanges(slots=3), by="admin")
    assert _state(database, "w").state is WorkerState.UNKNOWN
    with database.transaction() as session:
        update_worker(session, "w", WorkerChanges(state=WorkerState.DRAINING), by="admin")
    assert _state(database, "w").state is WorkerState.DRAINING


@pytest.mark.parametrize("word", ["pull", "heartbeat", "metadata"])
def test_the_next_word_makes_an_unknown_worker_active_again(
    database: Database, word: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A pull (which then gets work at once), a heartbeat or a report: each is a word."""
    _register(database, "w")
    with database.transaction() as session:
        job = submission.submit_job(session, JobSpec(slots=1), submitter="t")
    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    caplog.set_level("INFO", logger="app.events")
    with database.transaction() as session:
        if word == "pull":
            pulled = dispatch.pull(session, "w")
            assert pulled is not None and pulled.id == job.id
        elif word == "heartbeat":
            leases.heartbeat(session, "w")
        else:
            report_dynamic_metadata(session, "w", {"system": {"version": 1}})
    worker = _state(database, "w")
    assert worker.state is WorkerState.ACTIVE
    assert worker.state_reason is None and worker.state_set_by == "w"
    changes = [r for r in caplog.records if r.getMessage() == "worker.state_changed"]
    assert [(r.previous, r.state, r.by) for r in changes] == [("unknown", "active", "w")]  # type: ignore[attr-defined]


def test_a_finish_or_a_return_is_a_word_and_the_running_job_keeps_its_lease(
    database: Database,
) -> None:
    """Marking a worker takes nothing from it: its running job stays running on it with
    its slots, its lease runs out only on the lease's own clock, and its end, reported
    by the worker, makes the worker active again."""
    _register(database, "w")
    with database.transaction() as session:
        first = submission.submit_job(session, JobSpec(slots=1), submitter="t")
        second = submission.submit_job(session, JobSpec(slots=1), submitter="t")
    for _ in range(2):
        with database.transaction() as session:
            assert dispatch.pull(session, "w") is not None
    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    with database.transaction() as session:
        for job_id in (first.id, second.id):
            job = submission.get_job(session, job_id)
            assert job.state is JobState.RUNNING and job.attempts == 1
        assert session.scalar(select(QueueInstance.used_slots)) == 2
        open_allocations = select(Allocation).where(Allocation.released_at.is_(None))
        assert len(session.scalars(open_allocations).all()) == 2
        # The lease is its own: within it nothing expires, marked or not.
        assert leases.expire_leases(session, lease=timedelta(hours=1), max_attempts=3) == []
    with database.transaction() as session:
        dispatch.finish(session, first.id, "w", "finished")
    assert _state(database, "w").state is WorkerState.ACTIVE
    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    with database.transaction() as session:
        dispatch.return_job(session, second.id, "w")
    assert _state(database, "w").state is WorkerState.ACTIVE


def test_an_unknown_worker_is_no_candidate_and_explain_says_when_it_was_last_heard_from(
    database: Database,
) -> None:
    _register(database, "gone", "here")
    with database.transaction() as session:
        leases.heartbeat(session, "gone")
        job = submission.submit_job(session, JobSpec(slots=1), submitter="t")
        assert {c.worker for c in candidates.job_candidates(session, job)} == {"gone", "here"}
    with database.transaction() as session:
        # "here" speaks later: it is not silent at the sweep.
        leases.heartbeat(session, "here").last_seen = _later(TIMEOUT)
    assert _mark(database, after=TIMEOUT + 1) == ["gone"]
    last_seen = _state(database, "gone").last_seen
    assert last_seen is not None
    with database.transaction(write=False) as session:
        job = submission.get_job(session, job.id)
        assert [c.worker for c in candidates.job_candidates(session, job)] == ["here"]
        verdicts, summary = explain_workers(session, job, None, "first", [])
    by_worker = {v.worker: v for v in verdicts}
    gone = by_worker["gone"]
    assert gone.state is WorkerState.UNKNOWN and gone.eligible and not gone.can_run_now
    assert gone.reason == "worker-unknown" and "worker-unknown" in DYNAMIC_REASONS
    (clause,) = gone.clauses
    assert "not been heard from" in clause.message
    assert f"last heard from at {last_seen.isoformat()}" in clause.message
    assert by_worker["here"].can_run_now
    assert summary is not None and summary.first_failures == {"worker-unknown": 1}


def test_the_words_of_a_worker_never_heard_from(database: Database) -> None:
    _register(database, "new")
    registered = _state(database, "new").created_at
    with database.transaction() as session:
        job = submission.submit_job(session, JobSpec(slots=1), submitter="t")
    assert _mark(database, after=TIMEOUT + 1) == ["new"]
    with database.transaction(write=False) as session:
        job = submission.get_job(session, job.id)
        (verdict,), _summary = explain_workers(session, job, "new", "first", [])
    assert verdict.clauses[0].message.endswith(
        f"never heard from since its registration at {registered.isoformat()}"
    )


def test_a_sweep_skips_the_workers_another_transaction_holds(
    database: Database, backend: str
) -> None:
    """Several API processes sweep one PostgreSQL: a sweep does not wait for rows another
    one (or a pull) holds, and leaves them to it; each worker is marked, and logged, once."""
    if backend != "postgresql":
        pytest.skip("SQLite has one writer at a time: sweeps cannot overlap there")
    _register(database, "a", "b")
    later = _later(TIMEOUT + 1)
    with database.transaction() as first:
        marked = liveness.mark_silent(first, timeout_seconds=TIMEOUT, now=later)
        assert sorted(m.worker for m in marked) == ["a", "b"]
        with database.transaction() as second:
            assert liveness.mark_silent(second, timeout_seconds=TIMEOUT, now=later) == []
    with database.transaction() as session:
        assert liveness.mark_silent(session, timeout_seconds=TIMEOUT, now=later) == []
    _register(database, "c")
    with database.transaction() as pulling:
        # A pull of "c" holds its row: a sweep meanwhile leaves "c" alone (it has spoken).
        assert dispatch.pull(pulling, "c") is None
        with database.transaction() as sweeping:
            assert liveness.mark_silent(sweeping, timeout_seconds=0, now=_later(5)) == []
    assert _state(database, "c").state is WorkerState.ACTIVE
    assert _state(database, "b").state is WorkerState.UNKNOWN


def test_the_sweep_logs_each_mark(database: Database, caplog: pytest.LogCaptureFixture) -> None:
    _register(database, "w")
    caplog.set_level(logging.INFO, logger="app.events")
    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    (event,) = [r for r in caplog.records if r.name == "app.events"]
    assert event.getMessage() == "worker.state_changed"
    assert (event.previous, event.state, event.by) == ("active", "unknown", "jobmatch")  # type: ignore[attr-defined]


def test_the_express_lane_revives_in_its_own_statements(database: Database, backend: str) -> None:
    """PostgreSQL's express lane (app/matching/dispatch/express.py): a finish on a Core
    connection or on the event loop's makes an unknown worker active again and says so,
    for the log after its commit; a pull of an unknown worker is left to the general
    way, which revives it."""
    if backend != "postgresql":
        pytest.skip("the express lane is PostgreSQL's")
    _register(database, "w")
    with database.transaction() as session:
        for _ in range(3):
            submission.submit_job(session, JobSpec(slots=1), submitter="t")
    with database.transaction() as session:
        first = dispatch.pull(session, "w")
        second = dispatch.pull(session, "w")
        assert first is not None and second is not None
    report = SimpleNamespace(outcome="finished", reason=None, exit_code=0, output=None)

    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    with database.engine.connect() as connection, connection.begin():
        assert express.pull(connection, "w", utcnow()) is None
    assert _state(database, "w").state is WorkerState.UNKNOWN
    with database.engine.connect() as connection, connection.begin():
        ended = express.finish(connection, first.id, "w", report, utcnow())
    assert ended is not None and ended.worker_revived
    assert _state(database, "w").state is WorkerState.ACTIVE

    assert _mark(database, after=TIMEOUT + 1) == ["w"]
    pool = EventLoopConnections.for_database(database)
    assert pool is not None

    async def finish_on_loop() -> SimpleNamespace | None:
        assert pool is not None
        pool.bind(asyncio.get_running_loop())
        try:
            async with pool.transaction() as transaction:
                return await express.finish_on_loop(transaction, second.id, "w", report, utcnow())
        finally:
            await pool.close()

    ended = asyncio.run(finish_on_loop())
    assert ended is not None and ended.worker_revived
    worker = _state(database, "w")
    assert worker.state is WorkerState.ACTIVE and worker.state_set_by == "w"


def test_the_sweep_runs_twice_per_timeout_and_waits_one_after_its_start(
    database: Database, settings: Settings
) -> None:
    """Server downtime is not worker silence: a process marks nothing during its first
    timeout (every worker gets a full one, counted from when it could be heard again);
    then one sweep marks every silent worker. The sweep's period follows the timeout."""
    periods = {
        (30.0, 600.0): 30.0,
        (30.0, 4.0): 2.0,
        (30.0, 0.1): 1.0,  # a tiny timeout does not make the sweep spin
        (0.5, 4.0): 0.5,
        (30.0, 0.0): 30.0,  # no timeout: the lease sweep's own period
    }
    for (sweep, timeout), period in periods.items():
        update = {"lease_sweep_seconds": sweep, "worker_timeout_seconds": timeout}
        assert LeaseSweeper(database, settings.model_copy(update=update)).period() == period

    _register(database, "a", "b")
    quick = settings.model_copy(update={"worker_timeout_seconds": 0.3})
    sweeper = LeaseSweeper(database, quick)
    assert sweeper.in_liveness_grace() and sweeper.mark_silent() == 0
    time.sleep(0.35)
    assert not sweeper.in_liveness_grace() and sweeper.mark_silent() == 2
    assert sweeper.mark_silent() == 0
    assert _state(database, "a").state is WorkerState.UNKNOWN
    never = LeaseSweeper(database, settings.model_copy(update={"worker_timeout_seconds": 0}))
    assert never.in_liveness_grace(), "0: workers are never marked"
