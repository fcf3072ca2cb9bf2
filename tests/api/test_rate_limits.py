"""Request rate limits per token (issue 25): a token over its rate is answered 429
problem+json with Retry-After before anything is read or stored. Status 429 "Too Many
Requests" and its Retry-After are RFC 6585 section 4; Retry-After as whole seconds is
RFC 9110 section 10.2.3."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from app.api import rate_limits
from app.api.app import create_app
from app.db.engine import Database
from app.settings import Settings
from tests.support.http_api import assert_problem, register

pytestmark = pytest.mark.db


class Clock:
    """The rate limiter's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(rate_limits, "monotonic", fake)
    return fake


AppFactory = Callable[..., TestClient]


@pytest.fixture
def limited(settings: Settings, database: Database) -> Iterator[AppFactory]:
    """A started app with these rate limit settings."""
    clients: list[TestClient] = []

    def start(**limits: object) -> TestClient:
        app = create_app(settings.model_copy(update=limits), database=database)
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.__exit__(None, None, None)


def submitter(client: TestClient, admin: dict[str, str], subject: str) -> dict[str, str]:
    issued = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": subject}, headers=admin
    )
    assert issued.status_code == 201, issued.text
    return {"Authorization": f"Bearer {issued.json()['token']}"}


def test_a_token_over_its_rate_is_429_with_retry_after_and_others_are_not(
    limited: AppFactory, admin_headers: dict[str, str], clock: Clock
) -> None:
    client = limited(rate_limit_per_second=0.5, rate_limit_burst=3)
    ci = submitter(client, admin_headers, "ci")  # the admin's first request
    nightly = submitter(client, admin_headers, "nightly")
    for _ in range(3):
        assert client.get("/v1/jobs", headers=ci).status_code == 200
    refused = client.get("/v1/jobs", headers=ci)
    problem = assert_problem(refused, 429)
    # One request comes back every 2 s (0.5 a second).
    assert refused.headers["retry-after"] == "2"
    assert problem["detail"] == (
        "too many requests with this token: at most 0.5 a second (bursts of 3); retry after 2 s"
    )
    # Other tokens keep their own buckets: the admin has used two of three.
    assert client.get("/v1/jobs", headers=nightly).status_code == 200
    assert client.get("/v1/jobs", headers=admin_headers).status_code == 200
    assert_problem(client.get("/v1/jobs", headers=admin_headers), 429)
    # A second later half a request is back: still refused, retry after 1 s.
    clock.now += 1
    assert client.get("/v1/jobs", headers=ci).headers["retry-after"] == "1"
    clock.now += 1
    assert client.get("/v1/jobs", headers=ci).status_code == 200
    assert_problem(client.get("/v1/jobs", headers=ci), 429)


def test_a_refused_request_stores_nothing(
    limited: AppFactory, admin_headers: dict[str, str], clock: Clock
) -> None:
    client = limited(rate_limit_per_second=1, rate_limit_burst=2)
    ci = submitter(client, admin_headers, "ci")
    job = {"resources": "language: java"}
    assert client.post("/v1/jobs", json=job, headers=ci).status_code == 201
    assert client.post("/v1/jobs", json=job, headers=ci).status_code == 201
    assert_problem(client.post("/v1/jobs", json=job, headers=ci), 429)
    clock.now += 60
    assert len(client.get("/v1/jobs", headers=ci).json()["items"]) == 2


def test_long_poll_pulls_are_not_counted_unless_the_setting_says_so(
    limited: AppFactory, admin_headers: dict[str, str], clock: Clock
) -> None:
    client = limited(rate_limit_per_second=0.1, rate_limit_burst=1)
    worker = register(client, admin_headers, "w1", "language: ?java")
    clock.now += 60
    client.post("/v1/jobs", json={"resources": "language: java"}, headers=admin_headers)
    # The worker spends its one request, then plain pulls are refused ...
    assert client.post("/v1/workers/w1/heartbeat", headers=worker).status_code == 200
    assert_problem(client.post("/v1/workers/w1/pull", headers=worker), 429)
    assert_problem(client.post("/v1/workers/w1/pull?wait=0", headers=worker), 429)
    # ... but over its rate it still gets its job by a long-poll pull.
    assert client.post("/v1/workers/w1/pull?wait=5", headers=worker).status_code == 200

    counted = limited(rate_limit_per_second=0.1, rate_limit_burst=1, rate_limit_long_poll=True)
    assert counted.post("/v1/workers/w1/pull?wait=1", headers=worker).status_code == 204
    assert_problem(counted.post("/v1/workers/w1/pull?wait=1", headers=worker), 429)


def test_without_a_limit_nothing_is_refused(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    for _ in range(50):
        assert client.get("/v1/jobs", headers=admin_headers).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "query", "long_poll"),
    [
        ("POST", "/v1/workers/w1/pull", b"wait=30", True),
        ("POST", "/v1/workers/w1/pull", b"wait=0.5&x=1", True),
        ("POST", "/v1/workers/w1/pull", b"wait=0", False),
        ("POST", "/v1/workers/w1/pull", b"", False),
        ("POST", "/v1/workers/w1/pull", b"wait=soon", False),
        ("GET", "/v1/workers/w1/pull", b"wait=30", False),
        ("POST", "/v1/workers/w1/heartbeat", b"wait=30", False),
    ],
)
def test_which_requests_are_long_poll_pulls(
    method: str, path: str, query: bytes, long_poll: bool
) -> None:
    assert rate_limits.is_long_poll_pull(method, path, query) is long_poll
