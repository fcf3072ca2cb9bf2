"""Probes, and the promise that every error is problem+json."""

from __future__ import annotations

import time

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.api.app import create_app
from app.api.problems import POOL_EXHAUSTED
from app.db import migrate
from app.db.engine import Database
from app.settings import Settings
from tests.support.http_api import assert_problem


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.headers["x-request-id"]


def test_request_id_is_echoed(client: TestClient) -> None:
    response = client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"


def test_readyz_at_head(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["schema"] == sorted(migrate.head_revisions())


def test_readyz_is_503_when_schema_is_behind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'behind.db'}"
    database = Database(url)
    app = create_app(Settings(database_url=url, log_format="text"), database=database)
    with TestClient(app) as client:
        body = assert_problem(client.get("/readyz"), 503)
        assert "jobmatch db upgrade" in body["detail"]
    database.dispose()


def test_readyz_is_503_when_database_unreachable() -> None:
    """And the app starts at once: its two PostgreSQL listeners each waited 10 s for a
    first LISTEN that a refused connection would never run (20 s per start)."""
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    database = Database(url)
    app = create_app(Settings(database_url=url, log_format="text"), database=database)
    started = time.monotonic()
    with TestClient(app) as client:
        assert time.monotonic() - started < 5
        assert_problem(client.get("/readyz"), 503)


def test_unknown_route_is_problem_json(client: TestClient) -> None:
    assert_problem(client.get("/no/such/thing"), 404)


def test_wrong_method_is_problem_json(client: TestClient) -> None:
    assert_problem(client.put("/healthz"), 405)


def test_malformed_json_is_422_with_field_path(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    response = client.post(
        "/v1/tokens",
        content=b"{not json",
        headers={**admin_headers, "content-type": "application/json"},
    )
    body = assert_problem(response, 422)
    assert body["errors"][0]["type"] == "json_invalid"


def test_validation_error_names_the_field(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    response = client.post(
        "/v1/tokens", json={"role": "worker", "subject": "bad name!"}, headers=admin_headers
    )
    body = assert_problem(response, 422)
    assert [e["field"] for e in body["errors"]] == ["body.subject"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/jobs", {"resources": "", "slots": True}, "body.slots"),
        ("/v1/jobs", {"resources": "", "slots": "2"}, "body.slots"),
        ("/v1/jobs", {"resources": "", "priority": 1.5}, "body.priority"),
        ("/v1/workers", {"name": "w", "slots": False}, "body.slots"),
        (
            "/v1/tokens",
            {"role": "worker", "subject": "w", "expires_in_seconds": "60"},
            "body.expires_in_seconds",
        ),
    ],
)
def test_numbers_in_bodies_are_json_numbers(  # type: ignore[no-untyped-def]
    client: TestClient, admin_headers, path: str, body: dict[str, object], field: str
) -> None:
    """The schema says integer: a boolean or a numeric string is refused (422), not
    coerced (the fuzz test found ``"exit_code": false`` accepted by a finish)."""
    response = client.post(path, json=body, headers=admin_headers)
    problem = assert_problem(response, 422)
    assert [e["field"] for e in problem["errors"]] == [field]


def test_unhandled_error_is_500_without_internals(settings: Settings, database: Database) -> None:
    app = create_app(settings, database=database)
    router = APIRouter()

    @router.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret internal detail")

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as client:
        body = assert_problem(client.get("/boom"), 500)
    assert "secret" not in body["detail"]


def test_no_pooled_connection_in_time_is_503_not_500(
    settings: Settings, database: Database
) -> None:
    """Issue 37's bench at 2,000 waiting workers on SQLite: a burst of pulls queued on the
    one write lock held every pooled connection past the pool's timeout, and the requests
    waiting for one were answered 500. The process is busy, not broken: 503, retry."""
    app = create_app(settings, database=database)
    router = APIRouter()

    @router.get("/busy")
    def busy() -> None:
        raise PoolTimeout("QueuePool limit of size 5 overflow 10 reached")

    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/busy")
    body = assert_problem(response, 503)
    assert body["detail"] == POOL_EXHAUSTED
    assert response.headers["Retry-After"] == "1"


def test_openapi_documents_problem_and_security(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "Problem" in spec["components"]["schemas"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert client.get("/docs").status_code == 200
