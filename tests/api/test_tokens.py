"""Bearer tokens: the admin token from settings, issued tokens stored hashed."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import ApiToken
from app.db.tokens import hash_token
from tests.support.http_api import assert_problem


def issue(
    client: TestClient, admin_headers: dict[str, str], subject: str = "w1", role: str = "worker"
) -> dict:  # type: ignore[type-arg]
    response = client.post(
        "/v1/tokens", json={"role": role, "subject": subject}, headers=admin_headers
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def test_no_token_is_401(client: TestClient) -> None:
    response = client.get("/v1/tokens")
    assert_problem(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"


def test_unknown_token_is_401(client: TestClient) -> None:
    assert_problem(client.get("/v1/tokens", headers={"Authorization": "Bearer nope"}), 401)


def test_worker_token_on_admin_endpoint_is_403(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    token = issue(client, admin_headers)["token"]
    assert_problem(client.get("/v1/tokens", headers={"Authorization": f"Bearer {token}"}), 403)


def test_token_is_stored_hashed(client: TestClient, admin_headers, database: Database) -> None:  # type: ignore[no-untyped-def]
    issued = issue(client, admin_headers)
    with database.transaction(write=False) as session:
        stored = session.scalars(select(ApiToken)).one()
    assert stored.token_hash == hash_token(issued["token"])
    assert issued["token"] not in stored.token_hash


def test_list_and_revoke(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    first = issue(client, admin_headers, "w1")
    issue(client, admin_headers, "w2", role="submitter")
    page = client.get("/v1/tokens?limit=1", headers=admin_headers).json()
    assert [t["subject"] for t in page["items"]] == ["w1"]
    assert page["next_offset"] == 1
    assert "token" not in page["items"][0]

    revoked = client.delete(f"/v1/tokens/{first['id']}", headers=admin_headers)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    worker = {"Authorization": f"Bearer {first['token']}"}
    assert_problem(client.get("/v1/tokens", headers=worker), 401)
    assert_problem(client.delete("/v1/tokens/9999", headers=admin_headers), 404)


def test_admin_tokens_are_not_issued(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    response = client.post(
        "/v1/tokens", json={"role": "admin", "subject": "x"}, headers=admin_headers
    )
    assert_problem(response, 422)
