"""Request limits before any work (issue 19), against a live `jobmatch serve` on each
database: a body over the size limit is refused with 413 before it is read, a token is
checked before the body is, a body that arrives too slowly is cut off with 408, and the
server's memory stays where it was.

The probe that opened the issue: an anonymous 50 MB JSON array of ``{}`` cost 1.39 GB of
memory and 4.5 s before its 401.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.hostile.raw_http import (
    RawResponse,
    chunked,
    exchange,
    json_array_of_empty_objects,
    request_head,
    resident_megabytes,
)
from tests.live_server import LIVE_ADMIN_TOKEN, LiveServer

PROBLEM = "application/problem+json"
FIFTY_MB = 4 + 3 * 17_476_266  # 52,428,802 bytes of [{},{},...]
#: How much the server's resident memory may grow while it refuses the big bodies.
RSS_ALLOWANCE_MB = 50


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # One server per backend for the module: each test counts what it changes itself.
    running = LiveServer(
        database_url,
        tmp_path_factory.mktemp("limits") / "server.log",
        env={"JOBMATCH_LEASE_SWEEP_SECONDS": "0"},
        args=("--body-timeout", "1.5"),
    )
    running.start()
    yield running
    running.stop()


def server_pid(server: LiveServer) -> int:
    assert server.process is not None
    return server.process.pid


def assert_problem(response: RawResponse, status: int) -> dict[str, object]:
    assert response.status == status, (response.status, response.body[:300])
    assert response.headers["content-type"] == PROBLEM
    document = response.json()
    assert document["status"] == status
    return dict(document)


def json_post(path: str, *, length: int | None = None, token: str | None = None) -> bytes:
    headers = {"Content-Type": "application/json"}
    if length is None:
        headers["Transfer-Encoding"] = "chunked"
    else:
        headers["Content-Length"] = str(length)
    return request_head("POST", path, headers, token=token)


def test_50_mb_body_without_a_token_is_refused_at_once(server: LiveServer) -> None:
    before = resident_megabytes(server_pid(server))
    started = time.monotonic()
    response = exchange(
        server.port, json_post("/v1/jobs", length=FIFTY_MB), json_array_of_empty_objects(FIFTY_MB)
    )
    elapsed = time.monotonic() - started
    document = assert_problem(response, 413)
    assert "1048576 bytes" in str(document["detail"])
    assert response.headers["connection"] == "close"
    assert elapsed < 2.0, elapsed
    assert resident_megabytes(server_pid(server)) - before < RSS_ALLOWANCE_MB


def test_declared_length_over_the_limit_is_answered_before_any_body_byte(
    server: LiveServer,
) -> None:
    # No body is sent at all: a server that waited for it would hang until the timeout.
    started = time.monotonic()
    response = exchange(server.port, json_post("/v1/jobs", length=FIFTY_MB, token="x"))
    assert_problem(response, 413)
    assert time.monotonic() - started < 1.0


def test_chunked_body_over_the_limit_gets_413(server: LiveServer) -> None:
    before = resident_megabytes(server_pid(server))
    size = 4 + 3 * 1_000_000  # 3 MB, with a valid admin token: only the size is wrong
    response = exchange(
        server.port,
        json_post("/v1/jobs", token=LIVE_ADMIN_TOKEN),
        chunked(json_array_of_empty_objects(size)),
    )
    assert_problem(response, 413)
    assert resident_megabytes(server_pid(server)) - before < RSS_ALLOWANCE_MB
    # The same route still takes a body under the limit.
    status, job = server.request("POST", "/v1/jobs", {"slots": 1})
    assert status == 201, job


def test_invalid_token_is_refused_before_the_body_is_read(server: LiveServer) -> None:
    # A body under the size limit that never comes: only a token checked from the headers
    # can be answered without waiting for it.
    started = time.monotonic()
    response = exchange(server.port, json_post("/v1/jobs", length=900_000, token="not-a-token"))
    document = assert_problem(response, 401)
    assert document["detail"] == "the bearer token is unknown or revoked"
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.headers["connection"] == "close"
    assert time.monotonic() - started < 1.0


def test_invalid_token_with_a_huge_chunked_body_gets_401_and_memory_stays(
    server: LiveServer,
) -> None:
    before = resident_megabytes(server_pid(server))
    started = time.monotonic()
    response = exchange(
        server.port,
        json_post("/v1/jobs", token="not-a-token"),
        chunked(json_array_of_empty_objects(FIFTY_MB)),
    )
    assert_problem(response, 401)
    assert time.monotonic() - started < 2.0
    assert resident_megabytes(server_pid(server)) - before < RSS_ALLOWANCE_MB


def test_open_routes_still_answer_without_a_token(server: LiveServer) -> None:
    assert server.request("GET", "/healthz", token="")[0] == 200
    assert server.request("GET", "/openapi.json", token="")[0] == 200
    status, body = server.request("GET", "/v1/jobs", token="")
    assert status == 401, body


def test_body_that_arrives_too_slowly_gets_408(server: LiveServer) -> None:
    # Ten of the hundred declared bytes, then nothing: cut off after --body-timeout 1.5.
    jobs_before = server.request("GET", "/v1/jobs?limit=200")[1]["items"]
    started = time.monotonic()
    response = exchange(
        server.port,
        json_post("/v1/jobs", length=100, token=LIVE_ADMIN_TOKEN),
        [b'{"slots":1'],
    )
    elapsed = time.monotonic() - started
    document = assert_problem(response, 408)
    assert "JOBMATCH_BODY_TIMEOUT_SECONDS" in str(document["detail"])
    assert 1.4 < elapsed < 5.0, elapsed
    status, jobs = server.request("GET", "/v1/jobs?limit=200")
    assert status == 200 and jobs["items"] == jobs_before  # nothing was stored
