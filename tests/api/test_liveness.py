"""Liveness over HTTP (issue 35): an unknown worker as the API, the metrics and the console
show it, and each word a worker sends with its own token (on PostgreSQL the pull and
the finish go the express lane) makes it active again."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.base import utcnow
from app.db.engine import Database
from app.matching import liveness
from tests.api.test_metrics import _value
from tests.api.ui.test_console import ORIGIN
from tests.support.http_api import assert_problem, register, submit

pytestmark = pytest.mark.db


def _mark_all_silent(database: Database) -> list[str]:
    """The sweep's marking as if every worker had been silent for the whole timeout."""
    with database.transaction() as session:
        marked = liveness.mark_silent(
            session, timeout_seconds=600, now=utcnow() + timedelta(seconds=601)
        )
    return [m.worker for m in marked]


def _worker(client: TestClient, admin: dict[str, str], name: str) -> dict[str, Any]:
    answer = client.get(f"/v1/workers/{name}", headers=admin)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_an_unknown_worker_as_the_api_the_metrics_and_the_console_show_it(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "gone")
    assert _mark_all_silent(database) == ["gone"]
    gone = _worker(client, admin_headers, "gone")
    assert gone["state"] == "unknown" and gone["last_seen"] is None
    assert gone["state_set_by"] == "jobmatch"
    assert gone["state_reason"] == "not heard from for more than 600 s"
    listed = client.get("/v1/workers", headers=admin_headers).json()["items"]
    assert [(w["name"], w["state"]) for w in listed] == [("gone", "unknown")]

    metrics = client.get("/metrics").text
    assert _value(metrics, 'jobmatch_workers{state="unknown"}') == 1
    assert _value(metrics, 'jobmatch_workers{state="active"}') == 0

    signed_in = client.post(
        "/ui/sign-in",
        data={"token": admin_headers["Authorization"].removeprefix("Bearer ")},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert signed_in.status_code == 303, signed_in.text
    overview = client.get("/ui").text
    assert '<td class="num" data-state="unknown">1</td>' in overview
    page = client.get("/ui/workers").text
    assert 'class="state state-unknown">unknown</span> <small>not heard from' in page
    own = client.get("/ui/workers/gone").text
    assert "set by jobmatch" in own
    # It comes back by itself; an admin may drain it meanwhile (not "resume" it).
    assert 'id="drain"' in own and 'id="resume"' not in own


def test_an_unknown_worker_is_no_candidate_and_explain_says_why(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "gone")
    here = register(client, admin_headers, "here")
    job = submit(client, admin_headers)
    assert _mark_all_silent(database) == ["gone", "here"]
    assert client.post("/v1/workers/here/heartbeat", headers=here).status_code == 200
    candidates = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()
    assert [c["worker"] for c in candidates["items"]] == ["here"]
    explained = client.get(
        f"/v1/jobs/{job['id']}/explain", params={"worker": "gone"}, headers=admin_headers
    ).json()
    (verdict,) = explained["workers"]
    assert verdict["state"] == "unknown" and verdict["can_run_now"] is False
    assert verdict["reason"] == "worker-unknown"
    assert "never heard from since its registration" in verdict["clauses"][0]["message"]


def test_nobody_sets_unknown_over_http(client: TestClient, admin_headers: dict[str, str]) -> None:
    register(client, admin_headers, "w")
    refused = client.patch("/v1/workers/w", json={"state": "unknown"}, headers=admin_headers)
    body = assert_problem(refused, 422)
    assert "unknown" in body["detail"]
    assert _worker(client, admin_headers, "w")["state"] == "active"


@pytest.mark.parametrize("word", ["pull", "finish", "heartbeat", "load"])
def test_each_word_over_http_makes_an_unknown_worker_active_again(
    client: TestClient,
    admin_headers: dict[str, str],
    database: Database,
    word: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The pull and the finish (the express lane's on PostgreSQL), a heartbeat, a load
    report: after each the worker is active, and the change is logged once."""
    token = register(client, admin_headers, "w", slots=2)
    running = submit(client, admin_headers)
    assert client.post("/v1/workers/w/pull", headers=token).json()["id"] == running["id"]
    waiting = submit(client, admin_headers)
    assert _mark_all_silent(database) == ["w"]
    caplog.set_level(logging.INFO, logger="app.events")
    if word == "pull":
        pulled = client.post("/v1/workers/w/pull", headers=token)
        assert pulled.status_code == 200 and pulled.json()["id"] == waiting["id"]
    elif word == "finish":
        finished = client.post(
            f"/v1/jobs/{running['id']}/finish", json={"outcome": "finished"}, headers=token
        )
        assert finished.status_code == 200 and finished.json()["state"] == "finished"
    elif word == "heartbeat":
        assert client.post("/v1/workers/w/heartbeat", headers=token).status_code == 200
    else:
        report = {"load_values": {"load_avg": "0.25"}}
        assert client.put("/v1/workers/w/load", json=report, headers=token).status_code == 200
    after = _worker(client, admin_headers, "w")
    assert after["state"] == "active" and after["state_set_by"] == "w"
    assert after["state_reason"] is None
    changes = [
        (r.previous, r.state, r.by)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "worker.state_changed"
    ]
    assert changes == [("unknown", "active", "w")]
    # The job it ran all along was never taken from it.
    assert client.get(f"/v1/jobs/{running['id']}", headers=admin_headers).json()["worker"] == "w"
