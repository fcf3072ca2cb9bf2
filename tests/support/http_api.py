"""Helpers for tests that talk to the HTTP API through FastAPI's TestClient: the shape of
every error response, and registering workers and submitting jobs the way a client would.
Shared by tests/api, tests/matching and tests/hostile.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

PROBLEM = "application/problem+json"


def assert_problem(response, status: int) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """``response`` is an RFC 9457 problem document with ``status``; its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["title"] and body["detail"]
    assert body["type"] == "about:blank"
    return body  # type: ignore[no-any-return]


#: A per-slot license consumable (complex(5): INT, <=, consumable YES, default 0), as
#: POST /v1/attributes takes it: the Grid Engine attribute the API tests book.
LICENSE_ATTRIBUTE = {
    "name": "lic",
    "shortcut": "lic",
    "type": "INT",
    "relop": "<=",
    "requestable": "YES",
    "consumable": "YES",
    "default": "0",
}


def define_license(client: TestClient, admin: dict[str, str]) -> None:
    """Add :data:`LICENSE_ATTRIBUTE` to the complex through POST /v1/attributes."""
    response = client.post("/v1/attributes", json=LICENSE_ATTRIBUTE, headers=admin)
    assert response.status_code == 201, response.text


def register(
    client: TestClient, admin: dict[str, str], name: str, resources: str = "", slots: int = 1
) -> dict[str, str]:
    """Register worker ``name`` through POST /v1/workers; the worker's bearer header."""
    response = client.post(
        "/v1/workers", json={"name": name, "resources": resources, "slots": slots}, headers=admin
    )
    assert response.status_code in (200, 201), response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def submitter_token(client: TestClient, admin: dict[str, str], subject: str) -> dict[str, str]:
    """Issue a submitter token for ``subject`` through POST /v1/tokens; its bearer header."""
    issued = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": subject}, headers=admin
    )
    assert issued.status_code == 201, issued.text
    return {"Authorization": f"Bearer {issued.json()['token']}"}


def submit(client: TestClient, admin: dict[str, str], resources: str = "", **extra: object) -> dict:  # type: ignore[type-arg]
    """Submit a job through POST /v1/jobs as ``admin``; the created job's body."""
    response = client.post("/v1/jobs", json={"resources": resources, **extra}, headers=admin)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def answer_of(answer: tuple[int, Any], *expected: int) -> Any:
    """The body of a (status, body) answer, asserting its status (one of ``expected``;
    without them 200 or 201)."""
    status, body = answer
    assert status in (expected or (200, 201)), (status, body)
    return body
