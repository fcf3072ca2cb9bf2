"""Registering a name that exists (issue 35): refused with 409 naming the worker unless the
request says it replaces it (``?replace=true``); a replacement either keeps the worker's
token, and says so, or issues a new one and returns it. A registration never answers
without a token that works or a statement that the old one still does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import ApiToken
from tests.support.http_api import assert_problem, submit

JAVA = {"name": "w1", "resources": "language: ?java", "slots": 2}


def _register(client: TestClient, admin: dict[str, str], body: dict[str, Any], query: str = ""):  # type: ignore[no-untyped-def]
    return client.post(f"/v1/workers{query}", json=body, headers=admin)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _works(client: TestClient, token: str, name: str = "w1") -> bool:
    """Whether ``token`` acts for the worker now: its heartbeat is accepted."""
    return client.post(f"/v1/workers/{name}/heartbeat", headers=_bearer(token)).status_code == 200


def test_an_existing_name_is_refused_with_409_naming_the_worker_as_qconf_ae_does(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """Grid Engine's ``qconf -ae`` (and ``-ah``) on a host that exists answers that it
    "already exists" and changes nothing; so does a registration of an existing name
    without ``replace``."""
    first = _register(client, admin_headers, JAVA)
    assert first.status_code == 201, first.text
    token = first.json()["token"]

    body = assert_problem(_register(client, admin_headers, {"name": "w1", "slots": 8}), 409)
    assert body["worker"] == "w1"
    assert "'w1' already exists" in body["detail"]
    assert "?replace=true" in body["detail"] and "PATCH /v1/workers/w1" in body["detail"]
    # Nothing changed: the worker and its token are as they were.
    worker = client.get("/v1/workers/w1", headers=admin_headers).json()
    assert worker["resources"] == "language: ?java"
    assert worker["queues"][0]["slots"] == 2
    assert _works(client, token)
    # replace=false says the same as leaving it out.
    assert_problem(_register(client, admin_headers, JAVA, "?replace=false"), 409)


def test_a_replacement_keeps_the_token_and_says_so(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    token = _register(client, admin_headers, JAVA).json()["token"]
    replaced = _register(
        client, admin_headers, {"name": "w1", "resources": "language: ?python"}, "?replace=true"
    )
    assert replaced.status_code == 200, replaced.text
    answer = replaced.json()
    assert answer["token"] is None and answer["token_kept"] is True
    # The whole worker was replaced: the slots left out took their default again.
    assert answer["resources"] == "language: ?python"
    assert answer["queues"][0]["slots"] == 1
    # And the token it kept acts for it: it pulls a job the new worker fits.
    job = submit(client, admin_headers, "language: python")
    pulled = client.post("/v1/workers/w1/pull", headers=_bearer(token))
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]


def test_a_new_registration_says_no_token_was_kept(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """replace=true on a name that does not exist registers it, as without it."""
    for name, query in (("w1", ""), ("w2", "?replace=true")):
        created = _register(client, admin_headers, {"name": name}, query)
        assert created.status_code == 201, created.text
        assert created.json()["token_kept"] is False
        assert _works(client, created.json()["token"], name)


def test_a_replacement_of_a_worker_whose_tokens_were_revoked_issues_a_new_one(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    old = _register(client, admin_headers, JAVA).json()["token"]
    tokens = client.get("/v1/tokens", headers=admin_headers).json()["items"]
    (mine,) = [t for t in tokens if t["subject"] == "w1" and t["role"] == "worker"]
    assert client.delete(f"/v1/tokens/{mine['id']}", headers=admin_headers).status_code == 200
    assert not _works(client, old)

    replaced = _register(client, admin_headers, JAVA, "?replace=true")
    assert replaced.status_code == 200, replaced.text
    answer = replaced.json()
    assert answer["token_kept"] is False and answer["token"] is not None
    assert _works(client, answer["token"])
    assert not _works(client, old)


def test_a_replacement_of_a_worker_whose_token_expired_issues_a_new_one(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    old = _register(client, admin_headers, JAVA).json()["token"]
    with database.transaction() as session:
        session.execute(
            update(ApiToken)
            .where(ApiToken.subject == "w1")
            .values(expires_at=utcnow() - timedelta(minutes=1))
        )
    assert not _works(client, old)

    answer = _register(client, admin_headers, JAVA, "?replace=true").json()
    assert answer["token_kept"] is False and answer["token"] is not None
    assert _works(client, answer["token"])


@pytest.mark.parametrize("before", ["none", "usable", "revoked", "expired"])
@pytest.mark.parametrize("replace", [False, True])
def test_a_registration_never_answers_without_a_usable_token_or_saying_the_old_one_works(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    before: str,
    replace: bool,
) -> None:
    """The rule, over every state of the worker's token before the registration: the
    answer is a 409 that changed nothing, or holds a token that works, or says
    ``token_kept`` and the token the worker had works."""
    old = None
    if before != "none":
        old = _register(client, admin_headers, JAVA).json()["token"]
    if before == "revoked":
        tokens = client.get("/v1/tokens", headers=admin_headers).json()["items"]
        for row in tokens:
            client.delete(f"/v1/tokens/{row['id']}", headers=admin_headers)
    if before == "expired":
        with database.transaction() as session:
            session.execute(update(ApiToken).values(expires_at=utcnow() - timedelta(seconds=1)))

    response = _register(client, admin_headers, JAVA, "?replace=true" if replace else "")
    if before != "none" and not replace:
        assert_problem(response, 409)
        assert old is not None and _works(client, old) is (before == "usable")
        return
    assert response.status_code in (200, 201), response.text
    answer = response.json()
    if answer["token_kept"]:
        assert answer["token"] is None
        assert old is not None and _works(client, old)
    else:
        assert answer["token"] is not None and _works(client, answer["token"])


def test_the_rule_is_in_the_openapi_document(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/workers"]["post"]
    assert "409" in operation["responses"]
    (replace,) = [p for p in operation["parameters"] if p["name"] == "replace"]
    assert replace["in"] == "query" and replace["schema"]["default"] is False
    assert "token_kept" in operation["description"]
