"""The express lane (app/api/express.py) answers a pull and a finish exactly as their
FastAPI routes do, and hands everything else to them.

The lane serves a pull without a query string and a finish whose body is sent as
``application/json``; the same requests with ``?wait=0`` or with a ``charset`` parameter
reach the routes themselves. Each test here sends the pair side by side and compares the
answers: status, header names, content type and length, and the body's fields in order
(ids, names and times masked where the two jobs differ). The lane's counter says which
way each request went, so that a test cannot pass by comparing the route with itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from sqlalchemy.exc import OperationalError

from app.api.app import create_app, service_routes
from app.api.auth import PRINCIPAL_SCOPE_KEY, Principal
from app.api.express import ExpressLane, Threads
from app.api.routes.workers import REFRESH_HEADER
from app.db.dialect import COMMIT_OUTCOME_UNKNOWN
from app.db.engine import Database
from app.db.event_loop import EventLoopConnections
from app.db.models import Role
from app.db.notify import CHANNEL
from app.settings import Settings
from tests.support.http_api import register, submit

pytestmark = pytest.mark.db

#: Fields that differ between two jobs run side by side.
_VOLATILE = {"id", "worker", "submitted_at", "started_at", "ended_at"}
#: Headers that differ between any two answers.
_PER_ANSWER = {"x-request-id"}
_ROUTE_JSON = {"Content-Type": "application/json; charset=utf-8"}


def _served(operation: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "jobmatch_express_requests_total", {"operation": operation, "outcome": outcome}
    )
    return value or 0.0


class Ways:
    """The lane's counters before a step, to tell afterwards which way requests went."""

    def __init__(self, operations: tuple[str, ...] = ("pull", "finish", "batch")) -> None:
        self.operations = operations
        self.before = self._now()

    def _now(self) -> dict[tuple[str, str], float]:
        return {
            (operation, outcome): _served(operation, outcome)
            for operation in self.operations
            for outcome in ("served", "handed_over")
        }

    def since(self) -> dict[tuple[str, str], float]:
        now = self._now()
        return {key: now[key] - self.before[key] for key in now if now[key] != self.before[key]}


def _shape(response: Any) -> tuple[int, list[str], dict[str, Any] | None]:
    """What must be equal between the lane's answer and the route's."""
    headers = sorted(name for name in response.headers if name not in _PER_ANSWER)
    if not response.content:
        return response.status_code, headers, None
    body = response.json()
    masked = {key: ("<varies>" if key in _VOLATILE else value) for key, value in body.items()}
    return response.status_code, headers, masked


def _same_answers(lane: Any, route: Any) -> None:
    assert _shape(lane) == _shape(route), (lane.text, route.text)
    assert list(lane.json()) == list(route.json())  # the fields in the same order
    assert lane.headers["content-type"] == route.headers["content-type"] == "application/json"
    assert int(lane.headers["content-length"]) == len(lane.content)


def test_a_pull_and_a_finish_answer_as_their_routes(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    lane_worker = register(client, admin_headers, "w1", "os: linux")
    route_worker = register(client, admin_headers, "w2", "os: linux")
    first = submit(client, admin_headers, "os: linux", command=["echo", "hi"], timeout=60)
    second = submit(client, admin_headers, "os: linux", command=["echo", "hi"], timeout=60)

    ways = Ways()
    lane = client.post("/v1/workers/w1/pull", headers=lane_worker)
    route = client.post("/v1/workers/w2/pull?wait=0", headers=route_worker)
    assert ways.since() == {("pull", "served"): 1, ("pull", "handed_over"): 1}
    assert lane.status_code == 200, lane.text
    assert (lane.json()["id"], lane.json()["worker"]) == (first["id"], "w1")
    assert (route.json()["id"], route.json()["worker"]) == (second["id"], "w2")
    _same_answers(lane, route)

    ways = Ways()
    report = {"outcome": "failed", "reason": "exit 3", "exit_code": 3, "output": "no\n"}
    lane = client.post(f"/v1/jobs/{first['id']}/finish", json=report, headers=lane_worker)
    route = client.post(
        f"/v1/jobs/{second['id']}/finish",
        content=json.dumps(report),
        headers={**route_worker, **_ROUTE_JSON},
    )
    assert ways.since() == {("finish", "served"): 1, ("finish", "handed_over"): 1}
    assert lane.status_code == 200, lane.text
    assert (lane.json()["state"], lane.json()["failure_reason"]) == ("failed", "exit 3")
    _same_answers(lane, route)

    # What the lane did is stored as the route's was: the same history, event by event.
    kinds = [
        [
            (event["kind"], event["detail"])
            for event in client.get(f"/v1/jobs/{job['id']}/history", headers=admin_headers).json()[
                "events"
            ]
        ]
        for job in (first, second)
    ]
    assert kinds[0] == kinds[1] and [kind for kind, _ in kinds[0]][-2:] == ["dispatched", "failed"]


def test_a_pull_that_finds_nothing_answers_as_its_route(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1")
    ways = Ways()
    lane = client.post("/v1/workers/w1/pull", headers=worker)
    route = client.post("/v1/workers/w1/pull?wait=0", headers=worker)
    assert ways.since() == {("pull", "served"): 1, ("pull", "handed_over"): 1}
    assert lane.status_code == route.status_code == 204
    assert lane.content == route.content == b""
    # A worker that never reported its metadata is asked to, both ways.
    assert lane.headers.get(REFRESH_HEADER) == route.headers.get(REFRESH_HEADER) == "true"
    assert _shape(lane) == _shape(route)


def test_what_the_lane_cannot_answer_the_route_words(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    mine = register(client, admin_headers, "w1")
    other = register(client, admin_headers, "w2")
    job = submit(client, admin_headers)
    assert client.post("/v1/workers/w1/pull", headers=mine).status_code == 200

    ways = Ways()
    # Another worker's job: the operation refuses, the lane hands it over, the route words it.
    refused = client.post(
        f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=other
    )
    assert refused.status_code == 403, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert "is not running on worker 'w2'" in refused.json()["detail"]
    # A body the schema refuses: the route's 422 names the field.
    invalid = client.post(
        f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished", "exit_code": "0"}, headers=mine
    )
    assert invalid.status_code == 422, invalid.text
    assert [error["field"] for error in invalid.json()["errors"]] == ["body.exit_code"]
    # Not JSON at all.
    broken = client.post(
        f"/v1/jobs/{job['id']}/finish",
        content=b'{"outcome": ',
        headers={**mine, "Content-Type": "application/json"},
    )
    assert broken.status_code == 422, broken.text
    # Someone else's pull path: the route's 403.
    stranger = client.post("/v1/workers/w2/pull", headers=mine)
    assert stranger.status_code == 403, stranger.text
    assert ways.since() == {("finish", "handed_over"): 3}
    # None of it changed the job, which the lane then finishes.
    done = client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=mine)
    assert done.status_code == 200 and done.json()["state"] == "finished", done.text
    # The same report again (its answer was lost): answered 200 again, by the lane too.
    ways = Ways()
    again = client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=mine)
    assert again.status_code == 200 and again.json() == done.json()
    assert ways.since() == {("finish", "served"): 1}
    events = client.get(f"/v1/jobs/{job['id']}/history", headers=admin_headers).json()["events"]
    assert [event["kind"] for event in events].count("finished") == 1


def test_a_body_over_the_limit_while_the_lane_reads_it_gets_the_routes_413(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    app = create_app(settings.model_copy(update={"max_body_bytes": 64}), database=database)
    with TestClient(app, raise_server_exceptions=False) as client:
        worker = register(client, admin_headers, "w1")
        job = submit(client, admin_headers)
        assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200
        body = json.dumps({"outcome": "finished", "output": "x" * 200}).encode()

        def chunked() -> Any:  # no Content-Length: the limit applies while reading
            yield body[:40]
            yield body[40:]

        ways = Ways()
        large = client.post(
            f"/v1/jobs/{job['id']}/finish",
            content=chunked(),
            headers={**worker, "Content-Type": "application/json"},
        )
        assert large.status_code == 413, large.text
        assert large.headers["content-type"] == "application/problem+json"
        assert ways.since() == {("finish", "handed_over"): 1}
        state = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["state"]
        assert state == "running"


def test_a_commit_of_unknown_outcome_is_not_run_again(
    client: TestClient, admin_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the route does not run such a transaction again (app/db/engine.py), neither does
    the lane hand it over: 503, and the worker pulls again when it likes. An error before
    the commit is handed over, and the route's own attempt answers."""
    worker = register(client, admin_headers, "w1")
    submit(client, admin_headers)
    lost = OperationalError("COMMIT", {}, Exception("server closed the connection"))
    setattr(lost, COMMIT_OUTCOME_UNKNOWN, True)

    async def threads_only(_self: ExpressLane, _worker: str) -> Threads:
        return Threads.EXPRESS  # the threads' way (the event loop's: the test below)

    monkeypatch.setattr(ExpressLane, "_pull_on_loop", threads_only)

    def commit_lost(_self: ExpressLane, _worker: str, _express: bool = True) -> None:
        raise lost

    monkeypatch.setattr(ExpressLane, "_pull_once", commit_lost)
    ways = Ways()
    unknown = client.post("/v1/workers/w1/pull", headers=worker)
    assert unknown.status_code == 503, unknown.text
    assert unknown.headers["retry-after"] == "5"
    assert unknown.headers["content-type"] == "application/problem+json"
    assert ways.since() == {("pull", "served"): 1}

    def lock_lost(_self: ExpressLane, _worker: str, _express: bool = True) -> None:
        raise OperationalError("SELECT", {}, Exception("deadlock detected"))

    monkeypatch.setattr(ExpressLane, "_pull_once", lock_lost)
    ways = Ways()
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    assert ways.since() == {("pull", "handed_over"): 1}


def test_a_body_in_many_small_chunks_is_read_whole(
    client: TestClient, admin_headers: dict[str, str], settings: Settings, database: Database
) -> None:
    """The lane joins the chunks once (a body sent a byte at a time costs linear time).
    The lane is called directly, as the token gate calls it: the test client would send
    the body in one message."""
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200
    body = json.dumps({"outcome": "finished", "exit_code": 0}).encode() + b" " * 20_000
    messages = [
        {"type": "http.request", "body": body[at : at + 1], "more_body": at < len(body) - 1}
        for at in range(len(body))
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def route(*_args: Any) -> None:
        raise AssertionError("the lane handed the finish over")

    lane = ExpressLane(route, routes=service_routes(settings), database=database, settings=settings)
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/v1/jobs/{job['id']}/finish",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        PRINCIPAL_SCOPE_KEY: Principal(role=Role.WORKER, subject="w1"),
    }
    anyio.run(lane, scope, receive, send)
    assert not messages
    assert sent[0]["status"] == 200
    answer = json.loads(sent[1]["body"])
    assert (answer["id"], answer["state"], answer["exit_code"]) == (job["id"], "finished", 0)


def test_a_commit_of_unknown_outcome_on_the_event_loop_is_not_run_again(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same on the event loop's connection (app/db/event_loop.py): its backend is
    ended between the pull's statements and COMMIT, the lane answers 503 and runs nothing
    again, and the next pull gets a fresh connection and the job."""
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's way is PostgreSQL's")
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)
    real = EventLoopConnections.transaction
    killer = psycopg.connect(str(database.engine.url.set(drivername="postgresql")), autocommit=True)

    @asynccontextmanager
    async def dies_before_commit(self: EventLoopConnections) -> AsyncIterator[Any]:
        async with real(self) as transaction:
            yield transaction
            pid = transaction.connection.info.backend_pid
            killer.execute("SELECT pg_terminate_backend(%s)", [pid])
            await asyncio.sleep(0.2)

    try:
        monkeypatch.setattr(EventLoopConnections, "transaction", dies_before_commit)
        ways = Ways()
        unknown = client.post("/v1/workers/w1/pull", headers=worker)
        assert unknown.status_code == 503, unknown.text
        assert unknown.headers["retry-after"] == "5"
        assert ways.since() == {("pull", "served"): 1}
        state = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["state"]
        assert state == "waiting"  # the server rolled the killed transaction back
        monkeypatch.setattr(EventLoopConnections, "transaction", real)
        pulled = client.post("/v1/workers/w1/pull", headers=worker)
        assert pulled.status_code == 200, pulled.text
        assert pulled.json()["id"] == job["id"]
    finally:
        killer.close()


def test_on_postgresql_the_lane_pulls_and_finishes_without_a_thread(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 23: the express pull and finish run on the event loop's connection
    (app/db/event_loop.py); the hop to the thread pool is what they save."""
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's way is PostgreSQL's")
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)

    def no_thread(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the express lane went the threads' way")

    monkeypatch.setattr(ExpressLane, "_pull_once", no_thread)
    monkeypatch.setattr(ExpressLane, "_finish_once", no_thread)
    ways = Ways()
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    assert pulled.json()["id"] == job["id"]
    finished = client.post(
        f"/v1/jobs/{job['id']}/finish",
        json={"outcome": "finished", "exit_code": 0},
        headers=worker,
    )
    assert finished.status_code == 200, finished.text
    assert finished.json()["state"] == "finished"
    assert ways.since() == {("pull", "served"): 1, ("finish", "served"): 1}


def _masked_batch(response: Any) -> tuple[int, list[str], dict[str, Any]]:
    """What must be equal between two batch answers of different jobs."""
    headers = sorted(name for name in response.headers if name not in _PER_ANSWER)
    body = response.json()
    return (
        response.status_code,
        headers,
        {
            "finished": [{**ended, "job_id": "<varies>"} for ended in body["finished"]],
            "jobs": [
                {key: ("<varies>" if key in _VOLATILE else value) for key, value in job.items()}
                for job in body["jobs"]
            ],
            "placed": body["placed"],
        },
    )


def test_a_batch_pull_answers_as_its_route(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """Issue 38: the lane serves a batch pull (``max`` only, no long poll) on the event
    loop's connection; ``wait=0`` sends the same batch to the route. Both answer alike
    and store alike."""
    lane_worker = register(client, admin_headers, "w1", "os: linux", slots=2)
    route_worker = register(client, admin_headers, "w2", "os: linux", slots=2)
    for _ in range(4):
        submit(client, admin_headers, "os: linux", command=["true"])
    on_loop = database.dialect_name == "postgresql"

    ways = Ways()
    lane = client.post("/v1/workers/w1/pull-batch?max=2", headers=lane_worker)
    route = client.post("/v1/workers/w2/pull-batch?max=2&wait=0", headers=route_worker)
    assert lane.status_code == route.status_code == 200, (lane.text, route.text)
    # Elsewhere than on PostgreSQL the lane has no event loop's way: the route serves.
    expected = (
        {("batch", "served"): 1, ("batch", "handed_over"): 1}
        if on_loop
        else {("batch", "handed_over"): 2}
    )
    assert ways.since() == expected
    assert _masked_batch(lane) == _masked_batch(route)
    assert list(lane.json()) == list(route.json())

    ways = Ways()
    reports = [
        {"job_id": job["id"], "outcome": "finished", "exit_code": 0} for job in lane.json()["jobs"]
    ]
    lane = client.post(
        "/v1/workers/w1/pull-batch?max=2", json={"finished": reports}, headers=lane_worker
    )
    reports = [
        {"job_id": job["id"], "outcome": "finished", "exit_code": 0} for job in route.json()["jobs"]
    ]
    route = client.post(
        "/v1/workers/w2/pull-batch?max=2&wait=0", json={"finished": reports}, headers=route_worker
    )
    assert lane.status_code == route.status_code == 200, (lane.text, route.text)
    assert _masked_batch(lane) == _masked_batch(route)
    assert [ended["state"] for ended in lane.json()["finished"]] == ["finished", "finished"]
    assert lane.json()["jobs"] == [] and route.json()["jobs"] == []
    histories = [
        [
            [
                (e["kind"], e["detail"])
                for e in client.get(
                    f"/v1/jobs/{report['job_id']}/history", headers=admin_headers
                ).json()["events"]
            ]
            for report in body
        ]
        for body in (
            [{"job_id": j["job_id"]} for j in lane.json()["finished"]],
            [{"job_id": j["job_id"]} for j in route.json()["finished"]],
        )
    ]
    assert histories[0] == histories[1]


def test_on_postgresql_the_lane_serves_a_batch_without_a_thread(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch of plain jobs carrying plain reports is decided on the event loop's
    connection, in one transaction; a report the express way cannot decide (a resend)
    rolls it back and the route decides the whole batch."""
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's way is PostgreSQL's")
    worker = register(client, admin_headers, "w1", slots=3)
    jobs = [submit(client, admin_headers) for _ in range(3)]

    def no_thread(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the express lane went the threads' way")

    monkeypatch.setattr("app.api.express.batch_once", no_thread)
    ways = Ways()
    taken = client.post("/v1/workers/w1/pull-batch?max=3", headers=worker)
    assert taken.status_code == 200, taken.text
    assert [job["id"] for job in taken.json()["jobs"]] == [job["id"] for job in jobs]
    reports = [{"job_id": job["id"], "outcome": "finished"} for job in jobs]
    ended = client.post("/v1/workers/w1/pull-batch", json={"finished": reports}, headers=worker)
    assert ended.status_code == 200, ended.text
    assert [e["state"] for e in ended.json()["finished"]] == ["finished"] * 3
    assert ways.since() == {("batch", "served"): 2}

    monkeypatch.undo()
    ways = Ways()
    again = client.post("/v1/workers/w1/pull-batch", json={"finished": reports}, headers=worker)
    assert again.status_code == 200, again.text
    assert [e["state"] for e in again.json()["finished"]] == ["finished"] * 3
    assert ways.since() == {("batch", "handed_over"): 1}


def _job_rows(client: TestClient, admin: dict[str, str], job_id: int) -> tuple[Any, ...]:
    """What is stored of a job: its representation and its history, masked where two
    jobs submitted side by side differ."""
    job = client.get(f"/v1/jobs/{job_id}", headers=admin).json()
    events = client.get(f"/v1/jobs/{job_id}/history", headers=admin).json()["events"]
    return (
        {key: ("<varies>" if key in _VOLATILE else value) for key, value in job.items()},
        [(event["kind"], event["worker"], event["detail"]) for event in events],
    )


@pytest.mark.parametrize(
    ("request_fields", "state"),
    [
        ({"resources": "os: linux"}, "waiting"),
        ({"resources": "os: plan9"}, "failed"),
        ({"constraint": {"properties": ["ssd"]}, "slots": 1, "verify": "w"}, "failed"),
        ({"requires": "host:node[0-1]"}, "failed"),
    ],
)
def test_a_submission_answers_as_its_route(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    request_fields: dict[str, Any],
    state: str,
) -> None:
    """Issue 38: the lane stores a plain job of a known category on the event loop's
    connection; the same body with a charset parameter reaches the route. Both answer
    alike (201, Location, the job) and store alike, a job no worker fits too (failed
    at once with "No suitable worker found")."""
    register(client, admin_headers, "w1", "os: linux")
    body: dict[str, Any] = {
        **request_fields,
        "command": ["echo", "hi"],
        "timeout": 60,
        "priority": 3,
    }
    assert client.post("/v1/jobs", json=body, headers=admin_headers).status_code == 201
    on_loop = database.dialect_name == "postgresql"

    ways = Ways(("submit",))
    lane = client.post("/v1/jobs", json=body, headers=admin_headers)
    route = client.post(
        "/v1/jobs", content=json.dumps(body), headers={**admin_headers, **_ROUTE_JSON}
    )
    expected = (
        {("submit", "served"): 1, ("submit", "handed_over"): 1}
        if on_loop
        else {("submit", "handed_over"): 2}
    )
    assert ways.since() == expected
    assert lane.status_code == route.status_code == 201, (lane.text, route.text)
    assert lane.json()["state"] == state
    assert lane.headers["location"] == f"/v1/jobs/{lane.json()['id']}"
    assert route.headers["location"] == f"/v1/jobs/{route.json()['id']}"
    _same_answers(lane, route)
    assert _job_rows(client, admin_headers, lane.json()["id"]) == _job_rows(
        client, admin_headers, route.json()["id"]
    )
    # The answer is the job as stored.
    stored = client.get(f"/v1/jobs/{lane.json()['id']}", headers=admin_headers).json()
    assert stored == lane.json()


def test_the_route_takes_over_every_submission_the_lane_cannot_decide(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """A new category, an Idempotency-Key, a query string, a body the route refuses, a
    Grid Engine field, an array job: each goes to the route (counted as handed over),
    which answers as it always did, and the lane's attempt stored nothing."""
    register(client, admin_headers, "w1", "os: linux")
    json_headers = {**admin_headers, "Content-Type": "application/json"}
    ways = Ways(("submit",))
    new_category = client.post("/v1/jobs", json={"resources": "os: linux"}, headers=admin_headers)
    assert new_category.status_code == 201, new_category.text
    keyed = client.post(
        "/v1/jobs",
        json={"resources": "os: linux"},
        headers={**admin_headers, "Idempotency-Key": "k1"},
    )
    assert keyed.status_code == 201, keyed.text
    replayed = client.post(
        "/v1/jobs",
        json={"resources": "os: linux"},
        headers={**admin_headers, "Idempotency-Key": "k1"},
    )
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json()["id"] == keyed.json()["id"]
    queried = client.post("/v1/jobs?x=1", json={"resources": "os: linux"}, headers=admin_headers)
    assert queried.status_code == 201, queried.text
    invalid = client.post("/v1/jobs", json={"priority": "high"}, headers=admin_headers)
    assert invalid.status_code == 422, invalid.text
    assert [error["field"] for error in invalid.json()["errors"]] == ["body.priority"]
    broken = client.post("/v1/jobs", content=b'{"resources": ', headers=json_headers)
    assert broken.status_code == 422, broken.text
    bad_tags = client.post("/v1/jobs", json={"resources": "os: linux;;;:"}, headers=admin_headers)
    assert bad_tags.status_code == 422, bad_tags.text
    project = client.post("/v1/jobs", json={"project": "nope"}, headers=admin_headers)
    assert project.status_code == 422, project.text
    assert "does not exist" in project.text
    array = client.post("/v1/jobs", json={"tasks": "1-3"}, headers=admin_headers)
    assert array.status_code == 422, array.text
    verify = client.post("/v1/jobs", json={"verify": "e"}, headers=admin_headers)
    assert verify.status_code in (201, 422), verify.text
    assert ways.since() == {("submit", "handed_over"): 10}
    # Nothing stored twice: one job per 201.
    created = [r for r in (new_category, keyed, queried, verify) if r.status_code == 201]
    listed = client.get("/v1/jobs", headers=admin_headers).json()["items"]
    assert sorted(job["id"] for job in listed) == sorted(r.json()["id"] for r in created)

    # A worker's token is not a submitter's: the route's 403, not counted.
    worker = register(client, admin_headers, "w2")
    ways = Ways(("submit",))
    refused = client.post("/v1/jobs", json={"resources": "os: linux"}, headers=worker)
    assert refused.status_code == 403, refused.text
    assert ways.since() == {}

    # Once the category exists the lane serves the plain body (on PostgreSQL).
    ways = Ways(("submit",))
    served = client.post("/v1/jobs", json={"resources": "os: linux"}, headers=admin_headers)
    assert served.status_code == 201, served.text
    outcome = "served" if database.dialect_name == "postgresql" else "handed_over"
    assert ways.since() == {("submit", outcome): 1}


def test_on_postgresql_the_lane_submits_without_the_route(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plain submission of a known category never reaches the general way, and its
    statement announces the waiting job (as the route does at its commit)."""
    if database.dialect_name != "postgresql":
        pytest.skip("the event loop's way is PostgreSQL's")
    worker = register(client, admin_headers, "w1", "os: linux")
    submit(client, admin_headers, "os: linux")
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200

    def no_route(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the submission went the general way")

    monkeypatch.setattr("app.matching.submission.submit_job", no_route)
    listener = psycopg.connect(
        str(database.engine.url.set(drivername="postgresql")), autocommit=True
    )
    try:
        listener.execute(f"LISTEN {CHANNEL}")
        ways = Ways(("submit",))
        jobs = []
        for _ in range(3):
            done = client.post("/v1/jobs", json={"resources": "os: linux"}, headers=admin_headers)
            assert done.status_code == 201, done.text
            jobs.append(done.json())
        assert ways.since() == {("submit", "served"): 3}
        payloads = [note.payload for note in listener.notifies(timeout=2, stop_after=3)]
    finally:
        listener.close()
    assert payloads == [f"c{job['category_id']}.{job['id']}" for job in jobs]
