"""The server runs a request's transaction again when it lost a race (issue 8): a deadlock
victim or serialization failure on PostgreSQL, a lock wait that ran out on SQLite. The
client sees the result of the attempt that committed, never a 503 for the race, and the
aborted attempts leave nothing behind."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from sqlalchemy import create_engine, event, func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.api.app import create_app
from app.api.express import ExpressLane, Threads
from app.db.dialect import COMMIT_OUTCOME_UNKNOWN
from app.db.engine import Database
from app.db.event_loop import APPLICATION_NAME as LOOP_APPLICATION_NAME
from app.db.models import Job
from app.db.retry import RetryPolicy, is_retryable_error, retry_reason
from app.settings import Settings
from tests.support.http_api import register, submit

pytestmark = pytest.mark.db


def retries(reason: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "jobmatch_transaction_retries_total", {"reason": reason, "outcome": outcome}
    )
    return value or 0.0


class FakeSerializationFailure(Exception):
    """Stands for psycopg's SerializationFailure: carries SQLSTATE 40001."""

    sqlstate = "40001"


@pytest.fixture
def failing_commits() -> Iterator[list[int]]:
    """Make the next N top-level commits (N = the first item, set by the test) fail as a
    serialization failure; counts every commit attempt in the second item."""
    state = [0, 0]

    def before_commit(session: Session) -> None:
        if session.in_nested_transaction():
            return  # a savepoint's release, not the request's commit
        state[1] += 1
        if state[0] > 0:
            state[0] -= 1
            raise OperationalError("COMMIT", {}, FakeSerializationFailure("could not serialize"))

    event.listen(Session, "before_commit", before_commit)
    yield state
    event.remove(Session, "before_commit", before_commit)


@pytest.fixture
def quiet_client(settings: Settings, database: Database) -> Iterator[TestClient]:
    """A client of a server without the lease sweeper, whose commits would be counted."""
    app = create_app(settings.model_copy(update={"lease_sweep_seconds": 0}), database=database)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def count_jobs(database: Database) -> int:
    with database.transaction(write=False) as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


def test_a_failed_commit_runs_the_whole_request_again(
    quiet_client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    failing_commits: list[int],
) -> None:
    """The commit is part of the retried unit: the first attempt's insert is rolled back
    and the second one's is the only job stored."""
    before = retries("serialization", "retried")
    failing_commits[0] = 1
    response = quiet_client.post("/v1/jobs", json={"resources": ""}, headers=admin_headers)
    assert response.status_code == 201, response.text
    assert failing_commits[1] == 2
    assert count_jobs(database) == 1
    assert (
        quiet_client.get(f"/v1/jobs/{response.json()['id']}", headers=admin_headers).status_code
        == 200
    )
    assert retries("serialization", "retried") == before + 1


def test_retries_are_bounded_then_503(
    quiet_client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    failing_commits: list[int],
) -> None:
    before = retries("serialization", "gave_up")
    failing_commits[0] = 1000
    response = quiet_client.post("/v1/jobs", json={"resources": ""}, headers=admin_headers)
    failing_commits[0] = 0
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "1"
    assert failing_commits[1] == Settings().transaction_attempts == 5
    assert count_jobs(database) == 0
    assert retries("serialization", "gave_up") == before + 1


def test_other_database_errors_are_not_retried(
    quiet_client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """An error that is not a lost race (here the server shutting down, 57P01) is not
    retried: one attempt, 503, nothing stored."""

    class AdminShutdown(Exception):
        """Stands for psycopg's AdminShutdown."""

        sqlstate = "57P01"

    commits: list[int] = []

    def before_commit(session: Session) -> None:
        if not session.in_nested_transaction():
            commits.append(1)
            raise OperationalError("COMMIT", {}, AdminShutdown("terminating connection"))

    event.listen(Session, "before_commit", before_commit)
    try:
        response = quiet_client.post("/v1/jobs", json={"resources": ""}, headers=admin_headers)
    finally:
        event.remove(Session, "before_commit", before_commit)
    assert response.status_code == 503
    assert response.json()["detail"] == "the database is unavailable"
    assert len(commits) == 1
    assert count_jobs(database) == 0


def test_backoff_is_jittered_exponential_and_capped() -> None:
    policy = RetryPolicy(attempts=5, base_delay=0.01, max_delay=0.05)

    class Top:
        def uniform(self, low: float, high: float) -> float:
            return high

    ceilings = [policy.delay(retry, Top()) for retry in range(1, 6)]  # type: ignore[arg-type]
    assert ceilings == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert all(0.0 <= policy.delay(3) <= 0.04 for _ in range(100))


def test_retry_reasons() -> None:
    class Orig(Exception):
        """A driver error with a SQLSTATE."""

        def __init__(self, sqlstate: str) -> None:
            super().__init__(sqlstate)
            self.sqlstate = sqlstate

    assert retry_reason(OperationalError("x", {}, Orig("40P01"))) == "deadlock"
    assert retry_reason(OperationalError("x", {}, Orig("40001"))) == "serialization"
    assert retry_reason(OperationalError("x", {}, Exception("database is locked"))) == "busy"


def test_a_locked_sqlite_database_is_waited_out(
    backend: str, database: Database, settings: Settings, admin_headers: dict[str, str]
) -> None:
    """SQLite: another writer holds the lock longer than the server's busy timeout; the
    request's BEGIN IMMEDIATE gives up with "database is locked", and the server tries
    again until the lock is free."""
    if backend != "sqlite":
        pytest.skip("SQLite's lock wait; PostgreSQL waits on row locks instead")
    impatient = Database(database.url, busy_timeout=0.05)
    app = create_app(settings.model_copy(update={"transaction_attempts": 30}), database=impatient)
    holding = threading.Event()
    before = retries("busy", "retried")

    def hold_the_write_lock() -> None:
        # Held until the server has retried once (not for a fixed time: on a loaded
        # machine the request may start only after a fixed hold has ended), at most 10 s.
        with database.transaction():
            holding.set()
            deadline = time.monotonic() + 10.0
            while retries("busy", "retried") == before and time.monotonic() < deadline:
                time.sleep(0.01)

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    try:
        assert holding.wait(5)
        with TestClient(app, raise_server_exceptions=False) as client:
            response = client.post("/v1/jobs", json={"resources": ""}, headers=admin_headers)
    finally:
        holder.join()
        impatient.dispose()
    assert response.status_code == 201, response.text
    assert retries("busy", "retried") > before
    assert count_jobs(database) == 1


def _waiting_on_a_lock(database: Database, table: str) -> bool:
    """Whether a backend waits for a row of ``table``: it holds (or waits for) the row's
    tuple lock while it waits for the holder's transaction. Asked of pg_locks, not of the
    statement's text: pg_stat_activity keeps only its first 1,024 bytes, and the pull
    books inside a long WITH on PostgreSQL."""
    with database.engine.connect() as connection:
        return bool(
            connection.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid"
                    " WHERE a.wait_event_type = 'Lock' AND a.datname = current_database()"
                    " AND l.locktype = 'tuple' AND l.relation = CAST(:table AS regclass)"
                ),
                {"table": table},
            )
        )


def test_a_deadlocked_pull_is_retried_by_the_server(
    backend: str, client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """PostgreSQL, a real deadlock: another transaction holds the worker's queue instance
    and then asks for the worker row, while the pull holds the worker row (lock order
    worker -> job -> queue instances) and waits to book the queue instance. PostgreSQL
    aborts the pull (the other side's deadlock_timeout is long, so the pull is the victim);
    the server runs the pull again, which waits for the other side to commit and then
    dispatches the job. The client gets 200 and the job, not a 503."""
    if backend != "postgresql":
        pytest.skip("SQLite serialises writers at BEGIN IMMEDIATE: no deadlock possible")
    worker = register(client, admin_headers, "host", slots=1)
    job = submit(client, admin_headers)
    before = retries("deadlock", "retried")
    outcome: dict[str, Any] = {}

    def pull() -> None:
        response = client.post("/v1/workers/host/pull", headers=worker)
        outcome["status"], outcome["body"] = response.status_code, response.json()

    with database.engine.connect() as side:
        side.execute(text("SET LOCAL deadlock_timeout = '60s'"))
        side.execute(text("SELECT id FROM queue_instances FOR UPDATE"))
        puller = threading.Thread(target=pull)
        puller.start()
        deadline = time.monotonic() + 20
        while not _waiting_on_a_lock(database, "queue_instances"):
            assert time.monotonic() < deadline, "the pull never waited for the queue instance"
            time.sleep(0.02)
        # Closes the cycle; blocks until PostgreSQL has aborted the pull (deadlock_timeout).
        side.execute(text("SELECT id FROM workers WHERE name = 'host' FOR UPDATE"))
        side.commit()
    puller.join(timeout=30)
    assert not puller.is_alive()
    assert outcome["status"] == 200, outcome
    assert outcome["body"]["id"] == job["id"]
    assert retries("deadlock", "retried") == before + 1


def _terminate_pooled_connections(database: Database) -> int:
    """Kill the pool's connections to the test database, as an idle timeout or a network
    failure would: they die unseen. The listening connections (whose last statement is a
    LISTEN) are spared: their loss makes every remembered token be looked up again
    (app/db/revocations.py), and that lookup would meet the dead connection first. From
    an engine of its own: a connection of the pool would spare itself. Returns once they
    are gone (the timeout argument of pg_terminate_backend waits for that)."""
    return _terminate(
        database,
        "pid <> pg_backend_pid() AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN %'",
        {},
    )


def _terminate(database: Database, which: str, params: dict[str, Any]) -> int:
    """Terminate the test database's backends that ``which`` (SQL over
    pg_stat_activity) selects, from an engine of its own; how many, once they are gone."""
    killer = create_engine(database.url)
    with killer.connect() as connection:
        killed = connection.execute(
            text(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
                f" WHERE datname = current_database() AND {which}"
            ),
            params,
        ).scalar_one()
    killer.dispose()
    return int(killed)


@pytest.fixture
def _fresh_pool_after(database: Database) -> Iterator[None]:
    """The pool may still hold connections the test killed and the request did not meet;
    the database is shared by the tests after this one, which run without a retry."""
    yield
    database.engine.dispose()


@pytest.mark.usefixtures("_fresh_pool_after")
def test_a_dead_pooled_connection_costs_a_retry_not_a_503(
    quiet_client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the pool's pre-ping (issue 23: a round trip per checkout), a pooled
    connection the server closed fails its first statement; the request runs again on a
    fresh connection, and the pull and finish answer as if nothing happened. The express
    lane's threads' way, which uses SQLAlchemy's pool (its event loop's way: the next
    test)."""
    if database.dialect_name != "postgresql":
        pytest.skip("SQLite connections live in the process; none dies unseen")

    async def threads_only(*_args: Any) -> Threads:
        return Threads.EXPRESS

    monkeypatch.setattr(ExpressLane, "_pull_on_loop", threads_only)
    monkeypatch.setattr(ExpressLane, "_finish_on_loop", threads_only)
    worker = register(quiet_client, admin_headers, "w1")
    job = submit(quiet_client, admin_headers)
    before = retries("lost_connection", "retried")
    # The pool holds a connection that the server then closes; the worker's token is
    # remembered (app/api/token_gate.py), so the pull's own transaction meets it first.
    assert quiet_client.post("/v1/workers/w1/heartbeat", headers=worker).status_code == 200
    assert _terminate_pooled_connections(database) >= 1
    pulled = quiet_client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    assert pulled.json()["id"] == job["id"]
    assert retries("lost_connection", "retried") == before + 1
    _terminate_pooled_connections(database)
    finished = quiet_client.post(
        f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finished.status_code == 200, finished.text
    assert finished.json()["state"] == "finished"


def _terminate_event_loop_connections(database: Database) -> int:
    """Kill the express lane's own connections (app/db/event_loop.py), as
    :func:`_terminate_pooled_connections` kills SQLAlchemy's."""
    return _terminate(database, "application_name = :name", {"name": LOOP_APPLICATION_NAME})


def test_a_dead_event_loop_connection_costs_a_retry_not_a_503(
    quiet_client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """The express lane's connection on the event loop died unseen: the attempt fails
    before its COMMIT, is counted as a retry, and runs again in a thread; the worker gets
    its job, and the next request opens a fresh connection on the loop."""
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's way is PostgreSQL's")
    worker = register(quiet_client, admin_headers, "w1")
    first, second = submit(quiet_client, admin_headers), submit(quiet_client, admin_headers)
    pulled = quiet_client.post("/v1/workers/w1/pull", headers=worker)  # opens the loop's
    assert pulled.status_code == 200 and pulled.json()["id"] == first["id"]
    finished = quiet_client.post(
        f"/v1/jobs/{first['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finished.status_code == 200, finished.text
    before = retries("lost_connection", "retried")
    assert _terminate_event_loop_connections(database) >= 1
    pulled = quiet_client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    assert pulled.json()["id"] == second["id"]
    assert retries("lost_connection", "retried") == before + 1
    finished = quiet_client.post(
        f"/v1/jobs/{second['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finished.status_code == 200, finished.text
    assert retries("lost_connection", "retried") == before + 1


def test_a_commit_whose_outcome_is_unknown_is_never_run_again() -> None:
    """A connection lost at COMMIT may have stored the transaction: not retried."""
    lost = OperationalError("COMMIT", {}, Exception("server closed the connection"))
    lost.connection_invalidated = True
    assert is_retryable_error(lost)
    setattr(lost, COMMIT_OUTCOME_UNKNOWN, True)
    assert not is_retryable_error(lost)
