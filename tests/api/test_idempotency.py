"""Idempotent submission with the Idempotency-Key header (issue 8)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Job
from tests.support.http_api import assert_problem


def test_same_key_and_body_give_the_same_job(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    client.post("/v1/workers", json={"name": "w"}, headers=admin_headers)
    headers = {**admin_headers, "Idempotency-Key": "order-17"}
    first = client.post("/v1/jobs", json={"resources": "", "priority": 3}, headers=headers)
    again = client.post("/v1/jobs", json={"priority": 3, "resources": ""}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    other_key = client.post(
        "/v1/jobs",
        json={"resources": "", "priority": 3},
        headers={**admin_headers, "Idempotency-Key": "order-18"},
    )
    assert other_key.json()["id"] != first.json()["id"]
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 2


def test_same_key_with_another_body_is_422(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    client.post("/v1/workers", json={"name": "w"}, headers=admin_headers)
    headers = {**admin_headers, "Idempotency-Key": "k1"}
    assert client.post("/v1/jobs", json={"priority": 1}, headers=headers).status_code == 201
    problem = assert_problem(client.post("/v1/jobs", json={"priority": 2}, headers=headers), 422)
    # A header is reported as one (issue 21: it said body.Idempotency-Key).
    assert problem["errors"][0]["field"] == "header.Idempotency-Key"
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 1


def test_keys_belong_to_their_submitter(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    client.post("/v1/workers", json={"name": "w"}, headers=admin_headers)
    alice = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "alice"}, headers=admin_headers
    ).json()["token"]
    mine = client.post("/v1/jobs", json={}, headers={**admin_headers, "Idempotency-Key": "k"})
    hers = client.post(
        "/v1/jobs", json={}, headers={"Authorization": f"Bearer {alice}", "Idempotency-Key": "k"}
    )
    assert mine.json()["id"] != hers.json()["id"]
    assert_problem(
        client.post("/v1/jobs", json={}, headers={**admin_headers, "Idempotency-Key": " " * 300}),
        422,
    )
