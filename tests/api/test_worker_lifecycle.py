"""Worker lifecycle over HTTP (issue 21): PATCH changes only the fields given, a draining
worker finishes what it runs and gets nothing new, a disabled one counts as able to run
nothing, and DELETE removes a worker that runs nothing (or requeues its jobs)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support.http_api import assert_problem, register, submit

FULL_WORKER: dict[str, Any] = {
    "name": "w1",
    "resources": "language: ?java, ?python; java: ?8, ?11, ?12",
    "slots": 2,
    "rank": 3,
    "properties": ["ssd", "gpu"],
    "inventory": "node/[core=4]",
}


def _register_full(client: TestClient, admin: dict[str, str]) -> dict[str, str]:
    response = client.post("/v1/workers", json=FULL_WORKER, headers=admin)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _worker(client: TestClient, admin: dict[str, str], name: str = "w1") -> dict[str, Any]:
    response = client.get(f"/v1/workers/{name}", headers=admin)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _patch(
    client: TestClient, admin: dict[str, str], body: dict[str, Any], name: str = "w1"
) -> Any:
    return client.patch(f"/v1/workers/{name}", json=body, headers=admin)


def test_a_drained_worker_keeps_everything_else(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    """The bug of the issue: draining through POST /v1/workers replaced the whole worker
    (resources "", slots 2 -> 1, properties and rank gone)."""
    _register_full(client, admin_headers)
    before = _worker(client, admin_headers)
    assert before["state_reason"] is None and before["state_set_by"] is None

    response = _patch(client, admin_headers, {"state": "draining", "reason": "kernel upgrade"})
    assert response.status_code == 200, response.text
    after = response.json()
    assert after == _worker(client, admin_headers)
    assert after["state"] == "draining"
    assert after["state_reason"] == "kernel upgrade"
    assert after["state_set_by"] == "admin"
    assert after["state_changed_at"] is not None
    for field in ("resources", "rank", "properties", "inventory", "queues", "free"):
        assert after[field] == before[field], field
    assert after["queues"][0]["slots"] == 2
    # Draining is read live, not cached: what the worker fits is unchanged.
    assert after["generation"] == before["generation"]

    resumed = _patch(client, admin_headers, {"state": "active"}).json()
    assert resumed["state"] == "active"
    assert resumed["state_reason"] is None, "a change of state without a reason clears it"
    assert resumed["resources"] == before["resources"]


def test_a_change_of_fit_bumps_the_generation(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    _register_full(client, admin_headers)
    before = _worker(client, admin_headers)
    after = _patch(client, admin_headers, {"resources": "language: ?python", "slots": 4}).json()
    assert after["generation"] == before["generation"] + 1
    assert after["resources"] == "language: ?python"
    assert after["queues"] == [{"queue": "default", "slots": 4, "used_slots": 0}]
    assert after["properties"] == before["properties"] and after["rank"] == before["rank"]
    cleared = _patch(client, admin_headers, {"rank": None, "inventory": None}).json()
    assert cleared["rank"] is None and cleared["inventory"] is None
    assert cleared["generation"] == after["generation"] + 1
    # The cache follows: a java job no longer fits w1, so nothing could run it.
    assert submit(client, admin_headers, "language: java")["state"] == "failed"


def test_bad_patches_change_nothing(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    _register_full(client, admin_headers)
    register(client, admin_headers, "w2")
    before = _worker(client, admin_headers)
    bad_bodies: list[dict[str, Any]] = [
        {"resources": "language java"},  # a Momotor notation error
        {"state": None},
        {"state": "sleeping"},
        {"slots": -1},
        {"slots": 3, "queues": [{"name": "default", "slots": 3}]},
        {"properties": ["a|b"]},
        {"inventory": "node/[core=x]"},
        {"colour": "blue"},
        {"state": "draining", "reason": "x" * 2000},
    ]
    for body in bad_bodies:
        problem = assert_problem(_patch(client, admin_headers, body), 422)
        assert problem["errors"], body
    taken = _patch(client, admin_headers, {"rank": 7}, name="w2")
    assert taken.status_code == 200
    assert_problem(_patch(client, admin_headers, {"rank": 7}), 409)
    assert _worker(client, admin_headers) == before
    assert_problem(_patch(client, admin_headers, {"state": "draining"}, name="nobody"), 404)


def test_patch_needs_the_admin_role(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    worker = _register_full(client, admin_headers)
    assert_problem(_patch(client, worker, {"state": "draining"}), 403)
    assert_problem(client.delete("/v1/workers/w1", headers=worker), 403)


def test_a_draining_worker_finishes_its_job_and_gets_nothing_new(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java", slots=2)
    first = submit(client, admin_headers, "language: java")
    assert client.post("/v1/workers/w1/pull", headers=worker).json()["id"] == first["id"]
    second = submit(client, admin_headers, "language: java")
    _patch(client, admin_headers, {"state": "draining", "reason": "maintenance"})

    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 204
    # It still counts as able to run the job (it will again once resumed): the job waits.
    assert submit(client, admin_headers, "language: java")["state"] == "waiting"
    candidates = client.get(f"/v1/jobs/{second['id']}/candidates", headers=admin_headers)
    assert [(c["worker"], c["state"]) for c in candidates.json()["items"]] == [("w1", "draining")]
    finished = client.post(
        f"/v1/jobs/{first['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert finished.status_code == 200, finished.text

    _patch(client, admin_headers, {"state": "active"})
    assert client.post("/v1/workers/w1/pull", headers=worker).json()["id"] == second["id"]


def test_neither_allocate_nor_the_scheduler_place_on_a_draining_worker(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    body = {"name": "w1", "slots": 4, "inventory": "node/[core=4]"}
    assert client.post("/v1/workers", json=body, headers=admin_headers).status_code == 201
    shaped = submit(client, admin_headers, "", shape="core=2")
    queued = submit(client, admin_headers, "", hard="hostname=w1")
    _patch(client, admin_headers, {"state": "draining"})

    assert_problem(client.post(f"/v1/jobs/{shaped['id']}/allocate", headers=admin_headers), 409)
    run = client.post("/v1/schedule", headers=admin_headers)
    assert run.status_code == 200, run.text
    for job in (shaped, queued):
        state = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["state"]
        assert state == "waiting", job

    _patch(client, admin_headers, {"state": "active"})
    started = client.post(f"/v1/jobs/{shaped['id']}/allocate", headers=admin_headers)
    assert started.json()["state"] == "running", started.text
    client.post("/v1/schedule", headers=admin_headers)
    state = client.get(f"/v1/jobs/{queued['id']}", headers=admin_headers).json()["state"]
    assert state == "running"


def test_a_disabled_worker_counts_as_able_to_run_nothing(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    waiting = submit(client, admin_headers, "language: java")
    _patch(client, admin_headers, {"state": "disabled", "reason": "broken disk"})

    assert client.post("/v1/workers/w1/pull", headers=worker).status_code == 204
    candidates = client.get(f"/v1/jobs/{waiting['id']}/candidates", headers=admin_headers)
    assert candidates.json()["items"] == []
    explained = client.get(
        f"/v1/jobs/{waiting['id']}/explain?worker=w1", headers=admin_headers
    ).json()
    reasons = [clause["reason"] for clause in explained["workers"][0]["clauses"]]
    assert "worker-disabled" in reasons
    failed = submit(client, admin_headers, "language: java")
    assert (failed["state"], failed["failure_reason"]) == ("failed", "No suitable worker found")


def test_delete_refuses_a_busy_worker_unless_requeue(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    worker = register(client, admin_headers, "w1", "language: ?java")
    job = submit(client, admin_headers, "language: java")
    assert client.post("/v1/workers/w1/pull", headers=worker).json()["state"] == "running"

    problem = assert_problem(client.delete("/v1/workers/w1", headers=admin_headers), 409)
    assert f"runs job {job['id']}; drain it and wait for it to end" in problem["detail"]
    assert _worker(client, admin_headers)["name"] == "w1"

    response = client.delete("/v1/workers/w1?requeue=true", headers=admin_headers)
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert_problem(client.get("/v1/workers/w1", headers=admin_headers), 404)
    requeued = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    assert (requeued["state"], requeued["worker"]) == ("waiting", None)
    events = client.get(f"/v1/jobs/{job['id']}/history", headers=admin_headers).json()["events"]
    assert events[-1]["kind"] == "requeued"
    assert events[-1]["worker"] == "w1" and "deleted" in events[-1]["detail"]
    # The worker's token went with it.
    assert_problem(client.post("/v1/workers/w1/pull", headers=worker), 401)
    assert_problem(client.delete("/v1/workers/w1", headers=admin_headers), 404)

    # A worker of the same name registered again picks the job up.
    again = register(client, admin_headers, "w1", "language: ?java")
    assert client.post("/v1/workers/w1/pull", headers=again).json()["id"] == job["id"]


def test_delete_keeps_the_history_of_finished_jobs(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    worker = register(client, admin_headers, "w1", "language: ?java")
    job = submit(client, admin_headers, "language: java")
    client.post("/v1/workers/w1/pull", headers=worker)
    client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=worker)

    assert client.delete("/v1/workers/w1", headers=admin_headers).status_code == 204
    finished = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    assert finished["state"] == "finished"
    events = client.get(f"/v1/jobs/{job['id']}/history", headers=admin_headers).json()["events"]
    assert [e["worker"] for e in events if e["kind"] == "dispatched"] == ["w1"]


def test_post_documents_that_it_replaces_the_whole_worker(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/workers"]["post"]
    assert "replace the whole worker" in operation["description"]
    assert "PATCH /v1/workers/{name}" in operation["description"]
