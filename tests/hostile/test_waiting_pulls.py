"""One worker's token cannot take the service down with waiting pulls (issue 37), against a
live `jobmatch serve` with its default limits, on each database.

The probe that opened the issue: a worker opened 2,000 connections, each `POST
/v1/workers/{name}/pull?wait=60`; within 0.3 s the server held 1,000 of them (its one
connection limit) and answered every other request 503 for a minute, /healthz included.
Now a worker holds one waiting pull per free slot: each newer pull supersedes the oldest,
which answers 204 at once, and everyone else is served meanwhile.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.raw_http import read_response, request_head
from tests.live_server import LiveServer

#: More than the 1,000 connections that were the whole budget before.
PULLS = 1200


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    running = LiveServer(database_url, tmp_path / "server.log")
    running.start()
    yield running
    running.stop()


def worker_token(server: LiveServer, name: str, resources: str) -> str:
    status, body = server.request(
        "POST", "/v1/workers", {"name": name, "resources": resources, "slots": 1}
    )
    assert status in (200, 201), body
    return str(body["token"])


@contextlib.contextmanager
def waiting_pulls(port: int, name: str, token: str, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections, each sending one waiting pull of the worker, in turn."""
    head = request_head("POST", f"/v1/workers/{name}/pull?wait=60", {}, token=token)
    connections = []
    try:
        for _ in range(count):
            connection = socket.create_connection(("127.0.0.1", port), timeout=60)
            connection.sendall(head)
            connections.append(connection)
        yield connections
    finally:
        for connection in connections:
            connection.close()


def test_one_worker_opening_1200_waiting_pulls_locks_nobody_out(server: LiveServer) -> None:
    greedy = worker_token(server, "greedy", "language: ?java")
    other = worker_token(server, "other", "language: ?python")
    with waiting_pulls(server.port, "greedy", greedy, PULLS) as connections:
        # Meanwhile everyone else is served: probes, the admin, another worker.
        for _ in range(3):
            started = time.monotonic()
            assert server.request("GET", "/healthz", token="")[0] == 200
            assert server.request("GET", "/v1/workers")[0] == 200
            answer = server.request("POST", "/v1/workers/other/pull", token=other)
            assert answer[0] == 204, answer
            assert time.monotonic() - started < 10  # served, not queued behind the pulls
        # Every pull but the newest was superseded, and answered so without waiting out
        # its 60 s.
        answers = []
        for connection in connections[:-1]:
            connection.settimeout(30)
            answers.append(read_response(connection))
        assert {answer.status for answer in answers} == {204}
        assert all(a.headers.get("jobmatch-superseded") == "true" for a in answers)
        # ... and closed: idle, they would hold the connection budget of everyone else.
        assert all(a.headers.get("connection") == "close" for a in answers)
        # The newest still waits, and a job reaches it.
        status, job = server.request("POST", "/v1/jobs", {"resources": "language: java"})
        assert status == 201, job
        newest = connections[-1]
        newest.settimeout(30)
        answer = read_response(newest)
        assert answer.status == 200, answer.body
        assert answer.json()["id"] == job["id"]
