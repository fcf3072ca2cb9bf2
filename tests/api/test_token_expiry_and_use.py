"""Tokens with an optional expiry and a coarse record of their last use (issue 25)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select, update

from app.api import token_gate
from app.api.app import create_app
from app.db.engine import Database
from app.db.models import ApiToken
from app.settings import Settings
from tests.support.http_api import assert_problem

pytestmark = pytest.mark.db

#: A route a submitter token may call: each use of a token in these tests.
SUBMITTER_ROUTE = "/v1/jobs"


def issue(client: TestClient, admin: dict[str, str], **body: object) -> dict:  # type: ignore[type-arg]
    response = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "ci", **body}, headers=admin
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def bearer(issued: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {"Authorization": f"Bearer {issued['token']}"}


def listed(client: TestClient, admin: dict[str, str]) -> list[dict]:  # type: ignore[type-arg]
    return client.get("/v1/tokens", headers=admin).json()["items"]  # type: ignore[no-any-return]


def test_a_token_answers_until_it_expires_then_401_says_expired(
    client: TestClient, admin_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    issued = issue(client, admin_headers, expires_in_seconds=3600)
    expires = datetime.fromisoformat(issued["expires_at"])
    assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=1)
    assert client.get(SUBMITTER_ROUTE, headers=bearer(issued)).status_code == 200
    # An hour later (the remembered answer carries the expiry, so it expires too).
    monkeypatch.setattr(token_gate, "utcnow", lambda: expires + timedelta(seconds=1))
    refused = assert_problem(client.get(SUBMITTER_ROUTE, headers=bearer(issued)), 401)
    assert refused["detail"] == (
        f"the bearer token expired at {expires.isoformat(timespec='seconds')}"
    )
    # Listed still, with its expiry.
    assert [t["expires_at"] for t in listed(client, admin_headers)] == [issued["expires_at"]]


def test_an_absolute_expiry_is_kept_and_a_token_without_one_never_expires(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    when = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    issued = issue(client, admin_headers, expires_at=when.isoformat())
    assert datetime.fromisoformat(issued["expires_at"]) == when
    assert issue(client, admin_headers, subject="forever")["expires_at"] is None


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"expires_at": "2020-01-01T00:00:00Z"}, "body.expires_at", "should be a time after now"),
        ({"expires_at": "2099-01-01T00:00:00"}, "body.expires_at", "timezone"),
        ({"expires_in_seconds": 0}, "body.expires_in_seconds", "greater than or equal to 1"),
        (
            {"expires_in_seconds": 60, "expires_at": "2099-01-01T00:00:00Z"},
            "body",
            "not both",
        ),
    ],
    ids=["past", "naive", "zero", "both"],
)
def test_a_bad_expiry_is_a_422_naming_the_field_and_stores_nothing(
    client: TestClient,
    admin_headers: dict[str, str],
    body: dict[str, object],
    field: str,
    words: str,
) -> None:
    response = client.post(
        "/v1/tokens", json={"role": "worker", "subject": "w1", **body}, headers=admin_headers
    )
    problem = assert_problem(response, 422)
    assert [error["field"] for error in problem["errors"]] == [field]
    assert words in problem["errors"][0]["message"]
    assert listed(client, admin_headers) == []


@pytest.fixture
def use_every_request(settings: Settings, database: Database) -> Iterator[TestClient]:
    """An app that writes a token's use on every request (interval 0)."""
    app = create_app(settings.model_copy(update={"token_last_use_seconds": 0}), database=database)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _set_last_use(database: Database, when: datetime) -> None:
    with database.transaction() as session:
        session.execute(update(ApiToken).values(last_used_at=when))


def _last_use(database: Database) -> datetime | None:
    with database.transaction(write=False) as session:
        return session.scalars(select(ApiToken.last_used_at)).one()


def test_the_last_use_is_written_once_per_interval(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    issued = issue(client, admin_headers)
    assert listed(client, admin_headers)[0]["last_used_at"] is None
    before = datetime.now(UTC)
    assert client.get(SUBMITTER_ROUTE, headers=bearer(issued)).status_code == 200
    first = _last_use(database)
    assert first is not None and first >= before - timedelta(seconds=1)
    assert datetime.fromisoformat(listed(client, admin_headers)[0]["last_used_at"]) == first
    # Within the interval (5 minutes by default) further uses write nothing: a marker
    # written meanwhile stays.
    marker = datetime(2000, 1, 1, tzinfo=UTC)
    _set_last_use(database, marker)
    for _ in range(5):
        assert client.get(SUBMITTER_ROUTE, headers=bearer(issued)).status_code == 200
    assert _last_use(database) == marker


def test_with_no_interval_every_use_is_written(
    use_every_request: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    issued = issue(use_every_request, admin_headers)
    marker = datetime(2000, 1, 1, tzinfo=UTC)
    for _ in range(2):
        _set_last_use(database, marker)
        assert use_every_request.get(SUBMITTER_ROUTE, headers=bearer(issued)).status_code == 200
        used = _last_use(database)
        assert used is not None and used > marker


def test_a_new_token_given_a_gone_tokens_id_has_its_first_use_written(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """SQLite gives the highest id again once its row is gone: the interval is remembered
    per token (its hash), so the new token does not inherit the old one's quiet time."""
    first = issue(client, admin_headers)
    assert client.get(SUBMITTER_ROUTE, headers=bearer(first)).status_code == 200
    with database.transaction() as session:
        (old_id,) = session.scalars(select(ApiToken.id)).all()
        session.execute(delete(ApiToken))
    second = issue(client, admin_headers)
    if database.dialect_name == "sqlite":  # PostgreSQL's sequence never gives an id again
        with database.transaction(write=False) as session:
            assert session.scalars(select(ApiToken.id)).one() == old_id
    assert client.get(SUBMITTER_ROUTE, headers=bearer(second)).status_code == 200
    assert _last_use(database) is not None
