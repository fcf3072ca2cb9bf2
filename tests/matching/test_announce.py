"""What writers announce to long-polling pulls (app/matching/announce.py), on both
databases: the tokens each committed change sends (through pg_notify on PostgreSQL, to the
process's subscribers on SQLite), and that a refused or rolled-back change sends none."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import notify
from app.db.engine import Database
from app.db.models import Worker
from tests.support.http_api import register, submit

pytestmark = pytest.mark.db


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The tokens of every transaction's announcements, as the commit is about to send
    them: those left for the commit and those a statement of the transaction sent itself
    (the one-statement pull and finish on PostgreSQL, app/db/notify.py notify_column),
    so that both ways of announcing are seen alike."""
    seen: list[set[str]] = []
    original = notify.send_pending
    original_on_loop = notify.payload_to_send

    def record(holder: Any) -> None:
        tokens = set(holder.info.get(notify.PENDING_KEY, ())) | set(
            holder.info.get(notify.SENT_KEY, ())
        )
        if tokens:
            seen.append(tokens)

    def recording(session: Session) -> None:
        record(session)
        original(session)

    def recording_on_loop(transaction: Any) -> str | None:
        # The express lane's transactions on the event loop (app/db/event_loop.py).
        record(transaction)
        return original_on_loop(transaction)

    monkeypatch.setattr(notify, "send_pending", recording)
    monkeypatch.setattr(notify, "payload_to_send", recording_on_loop)
    return seen


def worker_token(database: Database, name: str, kind: str = "w") -> str:
    """``w<id>`` (the worker changed) or, with kind ``r``, ``r<id>`` (its room changed)."""
    with database.transaction(write=False) as session:
        found = session.scalar(select(Worker.id).where(Worker.name == name))
    return f"{kind}{found}"


def test_a_waiting_submission_announces_its_category_and_a_failed_one_nothing(
    client: TestClient, admin_headers: dict[str, str], announced: list[set[str]]
) -> None:
    register(client, admin_headers, "w1", "language: ?java")
    announced.clear()
    job = submit(client, admin_headers, "language: java")
    # The job is named, so that a renewal knows when it was taken (app/matching/wakeups.py).
    assert announced == [{f"c{job['category_id']}.{job['id']}"}]
    announced.clear()
    failed = submit(client, admin_headers, "language: cobol")
    assert failed["state"] == "failed"
    assert announced == []


def test_a_pull_that_takes_a_job_counts_it_off_its_category(
    client: TestClient, admin_headers: dict[str, str], announced: list[set[str]]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    job = submit(client, admin_headers, "language: java")
    announced.clear()
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200
    assert announced == [{f"t{job['category_id']}.{job['id']}"}]
    announced.clear()
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 204
    assert announced == []  # an empty pull announces nothing


def test_finish_return_and_cancel_announce_the_room_they_free(
    client: TestClient,
    database: Database,
    admin_headers: dict[str, str],
    announced: list[set[str]],
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java", slots=2)
    w1 = worker_token(database, "w1", "r")
    first, second, third = (submit(client, admin_headers, "language: java") for _ in range(3))
    category = f"c{first['category_id']}.{second['id']}"
    for _ in range(2):
        assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200
    announced.clear()
    finish = client.post(
        f"/v1/jobs/{first['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finish.status_code == 200
    assert announced == [{w1}]
    announced.clear()
    back = client.post(f"/v1/jobs/{second['id']}/return", json={}, headers=worker)
    assert back.status_code == 200, back.text
    assert announced == [{w1, category}]  # room on w1, and a job of the category waits
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200
    announced.clear()
    running = [
        j["id"]
        for j in client.get("/v1/jobs", params={"state": "running"}, headers=admin_headers).json()[
            "items"
        ]
    ]
    cancel = client.post(f"/v1/jobs/{running[0]}/cancel", headers=admin_headers)
    assert cancel.status_code == 200, cancel.text
    assert announced == [{w1}]
    assert third["state"] == "waiting"


def test_a_change_of_a_worker_announces_it_and_a_global_change_everything(
    client: TestClient,
    database: Database,
    admin_headers: dict[str, str],
    announced: list[set[str]],
) -> None:
    register(client, admin_headers, "w1", "language: ?java")
    w1 = worker_token(database, "w1")
    announced.clear()
    # A registration again replaces the worker (and keeps its token) when it says so.
    replaced = client.post(
        "/v1/workers?replace=true",
        json={"name": "w1", "resources": "language: ?java; python: ?3", "slots": 1},
        headers=admin_headers,
    )
    assert replaced.status_code == 200 and replaced.json()["token_kept"], replaced.text
    assert announced == [{w1}]
    announced.clear()
    metadata = client.put(
        "/v1/workers/w1/metadata", json={"metadata": {"zone": "a"}}, headers=admin_headers
    )
    assert metadata.status_code == 200, metadata.text
    assert announced == [{w1}]
    announced.clear()
    host = client.put(
        "/v1/values/hosts/w1", json={"load_values": {"arch": "lx-amd64"}}, headers=admin_headers
    )
    assert host.status_code == 200, host.text
    assert announced == [{w1}]
    announced.clear()
    everywhere = client.put(
        "/v1/values/global", json={"complex_values": {"h_vmem": "64G"}}, headers=admin_headers
    )
    assert everywhere.status_code == 200, everywhere.text
    assert announced == [{"*"}]


def test_a_scheduler_placement_announces_the_worker_it_placed_on(
    client: TestClient,
    database: Database,
    admin_headers: dict[str, str],
    announced: list[set[str]],
) -> None:
    register(client, admin_headers, "w1", "")
    client.put(
        "/v1/values/hosts/w1", json={"load_values": {"arch": "lx-amd64"}}, headers=admin_headers
    )
    submit(client, admin_headers, "", hard="arch=lx*")
    announced.clear()
    run = client.post("/v1/schedule", headers=admin_headers)
    assert run.json()["dispatched"] == 1, run.text
    assert announced == [{worker_token(database, "w1", "r")}]


def test_a_rolled_back_transaction_announces_nothing(
    database: Database, announced: list[set[str]]
) -> None:
    heard: list[str] = []
    database.subscribers.append(heard.append)
    try:
        with pytest.raises(RuntimeError), database.transaction() as session:
            notify.announce(session, "c1")
            raise RuntimeError("the change failed")
        with database.transaction() as session:
            notify.announce(session, "c2", "c2", "w3")
    finally:
        database.subscribers.remove(heard.append)
    assert announced == [{"c2", "w3"}]  # once each, and only what committed
    if database.dialect_name == "sqlite":
        assert heard == ["c2 w3"]
    else:
        assert heard == []  # PostgreSQL carries them (NOTIFY), not the process


def test_deleting_a_worker_with_requeue_announces_its_jobs_categories(
    client: TestClient, admin_headers: dict[str, str], announced: list[set[str]]
) -> None:
    """A job the deleted worker ran waits again, as after a return or an expired lease:
    the pulls waiting for its category must hear of it (a second reader found that this
    one path announced nothing, so an idle worker long-polling slept past the job)."""
    worker = register(client, admin_headers, "w1", "language: ?java")
    register(client, admin_headers, "w2", "language: ?java")
    job = submit(client, admin_headers, "language: java")
    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 200
    announced.clear()
    deleted = client.delete("/v1/workers/w1?requeue=true", headers=admin_headers)
    assert deleted.status_code in (200, 204), deleted.text
    assert any(f"c{job['category_id']}.{job['id']}" in tokens for tokens in announced), announced
