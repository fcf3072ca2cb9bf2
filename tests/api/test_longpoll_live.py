"""Long-poll dispatch against real `jobmatch serve` processes (issue 22): two API processes
on one PostgreSQL database wake each other's waiters (NOTIFY crosses processes); the
server's header, body and keep-alive timeouts do not cut a wait; stopping the server
releases its waiting pulls instead of waiting for their deadlines.
"""

from __future__ import annotations

import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from tests.live_server import LiveServer

pytestmark = pytest.mark.db

JAVA = "language: java"


def register(server: LiveServer, name: str, resources: str) -> str:
    status, body = server.request(
        "POST", "/v1/workers", {"name": name, "resources": resources, "slots": 1}
    )
    assert status == 201, body
    token: str = body["token"]
    return token


def submit(server: LiveServer, resources: str) -> dict[str, Any]:
    status, body = server.request("POST", "/v1/jobs", {"resources": resources})
    assert status == 201, body
    job: dict[str, Any] = body
    return job


class Pull:
    """A long-polling pull in a thread: its status, body, and when it answered."""

    def __init__(self, server: LiveServer, name: str, token: str, wait: float) -> None:
        self.answer: tuple[int, Any] | None = None
        self.ended = 0.0
        self.started = time.monotonic()

        def run() -> None:
            try:
                self.answer = server.request(
                    "POST", f"/v1/workers/{name}/pull?wait={wait}", token=token, timeout=wait + 30
                )
            except OSError as error:  # said by sleeping_pull, not lost with the thread
                self.answer = (0, f"{type(error).__name__}: {error}")
            self.ended = time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, timeout: float = 90.0) -> tuple[int, Any]:
        self.thread.join(timeout)
        assert self.answer is not None, "the pull did not answer"
        return self.answer


def waiting(server: LiveServer) -> float:
    """The server's count of waiting pulls, from /metrics."""
    status, text = server.request("GET", "/metrics", token="")
    assert status == 200
    found = re.search(r"^jobmatch_longpoll_waiting (\S+)$", text, re.M)
    assert found is not None, text
    return float(found.group(1))


def until(
    condition: Callable[[], bool],
    what: str,
    timeout: float = 20.0,
    report: Callable[[], str] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; {report()}"
        time.sleep(0.05)


def _sessions(database: Database | None) -> str:
    """What every session of the test's PostgreSQL database is doing and waiting on."""
    if database is None or database.engine.dialect.name != "postgresql":
        return ""
    with database.engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT pid, application_name, state, wait_event_type, wait_event,"
            " now() - xact_start, left(query, 300) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).all()
    return "\n".join(" | ".join(str(value) for value in row) for row in rows)


def _report(server: LiveServer, pull: Pull, database: Database | None) -> str:
    """A stuck pull's story: its answer, the server's log but the polling of /metrics,
    and the database's sessions (two CI runs timed out here, and nothing told why)."""
    log = [line for line in server.log.read_text().splitlines() if "/metrics" not in line]
    return (
        f"its answer so far: {pull.answer}; log:\n"
        + "\n".join(log[-40:])
        + f"\nsessions:\n{_sessions(database)}"
    )


def sleeping_pull(
    server: LiveServer, name: str, token: str, wait: float, database: Database | None = None
) -> Pull:
    """A pull that waits on ``server`` (past its first attempt)."""
    pull = Pull(server, name, token, wait)
    # A pull that answered at once never waits: say what it answered, and why not.
    until(
        lambda: pull.answer is not None or waiting(server) == 1,
        "the pull to wait",
        report=lambda: _report(server, pull, database),
    )
    assert pull.answer is None, f"the pull answered instead of waiting: {pull.answer}"
    time.sleep(0.5)  # its first attempt (a few ms) is over
    return pull


@pytest.fixture
def servers(
    database_url: str, database: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., LiveServer]]:
    started: list[LiveServer] = []

    def start(**env: str) -> LiveServer:
        # Access logs too, for what a failure reports (sleeping_pull).
        env = {"JOBMATCH_LOG_LEVEL": "INFO", **env}
        server = LiveServer(database_url, tmp_path / f"server{len(started)}.log", env=env)
        server.start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def test_two_api_processes_on_postgresql_wake_each_others_waiters(
    backend: str, servers: Callable[..., LiveServer], database: Database
) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite's wake-ups stay in their process (docs/architecture.md)")
    first, second = servers(), servers()
    token = register(first, "w1", "language: ?java")
    pull = sleeping_pull(first, "w1", token, wait=20, database=database)
    submitted_at = time.monotonic()
    job = submit(second, JAVA)
    status, body = pull.result()
    assert status == 200, body
    assert body["id"] == job["id"]
    assert pull.ended - submitted_at < 10  # woken through NOTIFY, not by its deadline

    # And the other way round, on the same two processes.
    token2 = register(second, "w2", "language: ?python")
    pull = sleeping_pull(second, "w2", token2, wait=20, database=database)
    submitted_at = time.monotonic()
    job = submit(first, "language: python")
    status, body = pull.result()
    assert status == 200 and body["id"] == job["id"]
    assert pull.ended - submitted_at < 10


def test_the_servers_timeouts_do_not_cut_a_wait(servers: Callable[..., LiveServer]) -> None:
    server = servers(
        JOBMATCH_HEADER_TIMEOUT_SECONDS="1",
        JOBMATCH_BODY_TIMEOUT_SECONDS="1",
        JOBMATCH_KEEP_ALIVE_SECONDS="1",
    )
    token = register(server, "w1", "language: ?java")
    pull = Pull(server, "w1", token, wait=4)
    status, _body = pull.result()
    assert status == 204
    assert pull.ended - pull.started >= 3.5  # the whole wait, three times each timeout


def test_stopping_the_server_releases_waiting_pulls(servers: Callable[..., LiveServer]) -> None:
    server = servers()
    token = register(server, "w1", "language: ?java")
    pull = sleeping_pull(server, "w1", token, wait=60)
    stopped_at = time.monotonic()
    assert server.process is not None
    server.process.terminate()
    status, _body = pull.result()
    assert status == 204
    assert pull.ended - stopped_at < 20  # not its 60 s deadline
    # It exited by itself, within 20 s: uvicorn ends a graceful shutdown by raising the
    # signal it caught again (uvicorn.server.Server.capture_signals), hence -SIGTERM.
    assert server.process.wait(timeout=20) == -signal.SIGTERM


def test_a_pull_whose_worker_vanished_stops_waiting(servers: Callable[..., LiveServer]) -> None:
    """A worker killed while its pull waits (its connection closed, nothing sent): the
    wait ends at once, so a job submitted then is not taken for nobody, and the server
    still stops at once. Before, the orphaned pull waited out its 60 s, took the next job
    that fitted (held until its lease ran out) and kept the server from exiting."""
    server = servers()
    token = register(server, "w1", "language: ?java")
    connection = socket.create_connection(("127.0.0.1", server.port))
    connection.sendall(
        f"POST /v1/workers/w1/pull?wait=60 HTTP/1.1\r\nHost: test\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n".encode()
    )
    until(lambda: waiting(server) == 1, "the pull to wait")
    connection.close()
    until(lambda: waiting(server) == 0, "the vanished pull to stop waiting", timeout=5)
    job = submit(server, JAVA)
    time.sleep(0.5)
    assert server.request("GET", f"/v1/jobs/{job['id']}")[1]["state"] == "waiting"
    stopped_at = time.monotonic()
    assert server.process is not None
    server.process.terminate()
    assert server.process.wait(timeout=20) == -signal.SIGTERM
    assert time.monotonic() - stopped_at < 5
