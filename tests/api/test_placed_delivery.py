"""A job placed by POST /v1/schedule reaches its worker over HTTP (issue 22): the job
shows the attempt and the ``dispatched`` event, and the worker's next pull answers with
the same job body, marked ``Jobmatch-Placed: true``."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.routes.workers import PLACED_HEADER
from tests.support.http_api import register, submit

pytestmark = pytest.mark.db


def test_the_worker_pulls_the_job_the_scheduler_placed(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", slots=1)
    job = submit(client, admin_headers)
    run = client.post("/v1/schedule", headers=admin_headers)
    assert run.status_code == 200 and run.json()["dispatched"] == 1, run.text
    placed = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    assert (placed["state"], placed["attempts"]) == ("running", 1)
    events = client.get(f"/v1/jobs/{job['id']}/history", headers=admin_headers)
    assert events.status_code == 200, events.text
    dispatched = [e for e in events.json()["events"] if e["kind"] == "dispatched"]
    assert [(e["worker"], e["detail"]) for e in dispatched] == [
        ("w1", "attempt 1, placed by the scheduler")
    ]
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200, pulled.text
    assert pulled.headers.get(PLACED_HEADER) == "true"
    assert (pulled.json()["id"], pulled.json()["attempts"]) == (job["id"], 1)
    # Delivered once: nothing else waits, and a pulled job carries no mark.
    empty = client.post("/v1/workers/w1/pull", headers=worker)
    assert empty.status_code == 204 and PLACED_HEADER not in empty.headers
    finished = client.post(
        f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finished.status_code == 200, finished.text
    second = submit(client, admin_headers)
    pulled = client.post("/v1/workers/w1/pull", headers=worker)
    assert pulled.status_code == 200 and pulled.json()["id"] == second["id"]
    assert PLACED_HEADER not in pulled.headers
