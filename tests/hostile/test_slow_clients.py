"""Slow and numerous clients (issue 19), against a live `jobmatch serve` on each database:
connections that never finish their headers are closed after the header timeout while
/healthz keeps answering, and past the connection limit ordinary requests are answered 503
problem+json while the probes and the admin are still served (issue 37), and the server
goes on serving everyone once connections close.

The probe that opened the issue held 1,100 connections that never finished their headers
open for as long as it liked. uvicorn only times out idle keep-alive connections; the
header timeout is jobmatch's own (app/api/http_protocol.py).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.raw_http import read_response
from tests.live_server import LiveServer

HEADER_TIMEOUT = 2.0
SLOW_CONNECTIONS = 200
MAX_CONNECTIONS = 12


@contextlib.contextmanager
def half_sent_requests(port: int, count: int) -> Iterator[list[socket.socket]]:
    """Connections that sent the start of a request's headers and never the end."""
    connections = []
    try:
        for _ in range(count):
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            connections.append(connection)
        yield connections
    finally:
        for connection in connections:
            connection.close()


def closed_by_server(connection: socket.socket, wait: float) -> bool:
    """True when the server closed the connection (reading ends) within ``wait`` seconds;
    a 408 sent before the close is read and passed over."""
    connection.settimeout(wait)
    try:
        while connection.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True


def live_server(database_url: str, log: Path, *args: str) -> Iterator[LiveServer]:
    running = LiveServer(database_url, log, env={"JOBMATCH_LEASE_SWEEP_SECONDS": "0"}, args=args)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    """A short header timeout, and room for every slow connection of the tests."""
    yield from live_server(
        database_url,
        tmp_path / "server.log",
        *("--header-timeout", str(HEADER_TIMEOUT), "--max-connections", "1000"),
    )


@pytest.fixture
def small_server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    """A small connection limit, and a header timeout longer than the tests."""
    yield from live_server(
        database_url,
        tmp_path / "server.log",
        *("--max-connections", str(MAX_CONNECTIONS), "--header-timeout", "30"),
    )


def test_unfinished_headers_are_closed_after_the_timeout(server: LiveServer) -> None:
    with half_sent_requests(server.port, SLOW_CONNECTIONS) as connections:
        opened = time.monotonic()
        # Meanwhile the server answers everyone else.
        for _ in range(3):
            started = time.monotonic()
            assert server.request("GET", "/healthz", token="", timeout=2)[0] == 200
            assert time.monotonic() - started < 1.0
        # Every one is closed by the server, within the timeout and a margin for a busy
        # machine; none is still open once the first wait is over.
        deadline = opened + HEADER_TIMEOUT + 5.0
        closed = sum(
            closed_by_server(c, max(deadline - time.monotonic(), 0.01)) for c in connections
        )
        assert closed == SLOW_CONNECTIONS
        assert time.monotonic() - opened >= HEADER_TIMEOUT - 0.1


def test_the_header_timeout_answers_408_problem_json(server: LiveServer) -> None:
    with half_sent_requests(server.port, 1) as (connection,):
        connection.settimeout(HEADER_TIMEOUT + 5.0)
        response = read_response(connection)
    assert response.status == 408
    assert response.headers["content-type"] == "application/problem+json"
    assert "JOBMATCH_HEADER_TIMEOUT_SECONDS" in response.json()["detail"]


def test_a_silent_connection_is_closed_too(server: LiveServer) -> None:
    # Not one byte sent: uvicorn alone would keep this connection forever.
    with socket.create_connection(("127.0.0.1", server.port)) as connection:
        assert closed_by_server(connection, HEADER_TIMEOUT + 5.0)


#: An ordinary request: without a token it is answered 401 once admitted.
ORDINARY = "/v1/workers"


def test_connections_past_the_limit_are_refused_and_others_served(
    small_server: LiveServer,
) -> None:
    # Open connections are counted, the asking one included.
    with half_sent_requests(small_server.port, MAX_CONNECTIONS - 3):
        assert small_server.request("GET", ORDINARY, token="")[0] == 401
    with half_sent_requests(small_server.port, MAX_CONNECTIONS):
        time.sleep(0.2)
        status, body = small_server.request("GET", ORDINARY, token="")
        assert status == 503, body
        assert body["status"] == 503
        assert "JOBMATCH_MAX_CONNECTIONS" in body["detail"]
        # Issue 37: the probes and the operator are never locked out.
        for probe in ("/healthz", "/readyz", "/metrics"):
            assert small_server.request("GET", probe, token="")[0] == 200, probe
        assert small_server.request("GET", ORDINARY)[0] == 200  # the admin token
    # Once those connections are gone, the server serves everyone again.
    deadline = time.monotonic() + 5.0
    while small_server.request("GET", ORDINARY, token="")[0] != 401:
        assert time.monotonic() < deadline, "the server did not recover"
        time.sleep(0.1)


def test_the_503_says_when_to_retry(small_server: LiveServer) -> None:
    with half_sent_requests(small_server.port, MAX_CONNECTIONS):
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", small_server.port), timeout=5) as probe:
            probe.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            response = read_response(probe)
    assert response.status == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "1"
