"""debusine tasks over HTTP: registry, metadata endpoints, refresh, explanations."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def _worker(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    reply = client.post("/v1/workers", json={"name": name, "slots": 2}, headers=admin)
    assert reply.status_code == 201
    return {"Authorization": f"Bearer {reply.json()['token']}"}


def _report(client: TestClient, name: str, headers: dict[str, str], report: Any) -> Any:
    reply = client.post(f"/v1/workers/{name}/metadata", json={"metadata": report}, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_task_registry(client: TestClient, admin_headers: dict[str, str]) -> None:
    body = {"name": "sbuild", "version": 2, "requirements": {"ge": ["system:cpu_count", 4]}}
    created = client.post("/v1/tasks", json=body, headers=admin_headers)
    assert created.status_code == 201
    assert created.json()["requirements"] == {"ge": ["system:cpu_count", 4]}
    updated = client.post("/v1/tasks", json={**body, "version": 3}, headers=admin_headers)
    assert updated.status_code == 200 and updated.json()["version"] == 3
    listed = client.get("/v1/tasks", headers=admin_headers).json()["items"]
    assert [t["name"] for t in listed] == ["sbuild"]
    assert client.get("/v1/tasks/nope", headers=admin_headers).status_code == 404


def test_bad_requirements_are_a_422_naming_the_path(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    body = {"name": "sbuild", "requirements": {"and": [{"exists": "a"}, {"ge": ["b", "x"]}]}}
    reply = client.post("/v1/tasks", json=body, headers=admin_headers)
    assert reply.status_code == 422
    assert reply.headers["content-type"] == "application/problem+json"
    error = reply.json()["errors"][0]
    assert error["field"] == "body.requirements"
    assert error["notation"] == "task-requirements"
    assert "$.and[1].ge[1]" in error["message"]
    assert client.get("/v1/tasks", headers=admin_headers).json()["items"] == []


def test_unknown_task_at_submission_is_a_422(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    reply = client.post("/v1/jobs", json={"task": "sbuild"}, headers=admin_headers)
    assert reply.status_code == 422
    assert reply.json()["errors"][0]["field"] == "body.task"


def test_metadata_endpoints_and_who_may_write_them(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    w1 = _worker(client, admin_headers, "w1")
    w2 = _worker(client, admin_headers, "w2")
    report = {"system": {"cpu_count": 8}, "sbuild": {"version": 2, "chroots": ["sid"]}}
    # A worker reports only its own metadata; only the admin sets static metadata.
    assert (
        client.post("/v1/workers/w1/metadata", json={"metadata": report}, headers=w2).status_code
        == 403
    )
    static = {"metadata": {"system:cpu_count": 2, "tasks_denylist": ["lintian"]}}
    assert client.put("/v1/workers/w1/metadata", json=static, headers=w1).status_code == 403
    body = _report(client, "w1", w1, report)
    assert body["namespaces"]["sbuild"]["version"] == 2
    assert body["refresh_metadata"] is False
    body = client.put("/v1/workers/w1/metadata", json=static, headers=admin_headers).json()
    assert body["effective"]["system:cpu_count"] == 2  # static over dynamic
    assert body["dynamic"]["system:cpu_count"] == 8
    # A worker may not give itself an allowlist.
    bad = client.post(
        "/v1/workers/w1/metadata", json={"metadata": {"tasks_allowlist": {}}}, headers=w1
    )
    assert bad.status_code == 422
    assert client.get("/v1/workers/w1/metadata", headers=w2).status_code == 403


def test_pull_and_heartbeat_ask_for_a_refresh_until_reported(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    w1 = _worker(client, admin_headers, "w1")
    pulled = client.post("/v1/workers/w1/pull", headers=w1)
    assert pulled.status_code == 204
    assert pulled.headers["Jobmatch-Refresh-Metadata"] == "true"
    assert client.post("/v1/workers/w1/heartbeat", headers=w1).json()["refresh_metadata"] is True
    _report(client, "w1", w1, {"system": {}})
    pulled = client.post("/v1/workers/w1/pull", headers=w1)
    assert "Jobmatch-Refresh-Metadata" not in pulled.headers
    assert client.post("/v1/workers/w1/heartbeat", headers=w1).json()["refresh_metadata"] is False


def test_explanations_cover_deny_versions_and_requirements(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    task = {"name": "sbuild", "version": 2, "requirements": {"ge": ["system:cpu_count", 4]}}
    client.post("/v1/tasks", json=task, headers=admin_headers)
    ok = _worker(client, admin_headers, "ok")
    old = _worker(client, admin_headers, "old")
    denied = _worker(client, admin_headers, "denied")
    _report(client, "ok", ok, {"system": {"cpu_count": 8}, "sbuild": {"version": 2}})
    _report(client, "old", old, {"system": {"cpu_count": 2}, "sbuild": {"version": 1}})
    _report(client, "denied", denied, {"system": {"cpu_count": 8}, "sbuild": {"version": 2}})
    client.put(
        "/v1/workers/denied/metadata",
        json={"metadata": {"tasks_denylist": ["sbuild"]}},
        headers=admin_headers,
    )
    job = client.post(
        "/v1/jobs",
        json={"task": "sbuild", "command": ["true"], "timeout": 60},
        headers=admin_headers,
    ).json()
    assert job["state"] == "waiting" and job["command"] == ["true"] and job["timeout"] == 60
    workers = {
        w["worker"]: w
        for w in client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()[
            "workers"
        ]
    }
    assert workers["ok"]["eligible"] is True
    assert workers["denied"]["misfit_reason"] == "task-denied"
    assert [c["message"] for c in workers["denied"]["clauses"]] == [
        "task sbuild is denied on this worker: it is in tasks_denylist"
    ]
    assert workers["old"]["misfit_reason"] == "task-version"
    assert [c["message"] for c in workers["old"]["clauses"]] == [
        "worker reports sbuild version 1, task needs 2",
        'task sbuild: requirement {"ge": ["system:cpu_count", 4]} fails: system:cpu_count is 2',
    ]
    candidates = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()
    assert [c["worker"] for c in candidates["items"]] == ["ok"]


def test_worker_returns_a_running_job(client: TestClient, admin_headers: dict[str, str]) -> None:
    w1 = _worker(client, admin_headers, "w1")
    job = client.post("/v1/jobs", json={}, headers=admin_headers).json()
    assert client.post("/v1/workers/w1/pull", headers=w1).json()["id"] == job["id"]
    back = client.post(f"/v1/jobs/{job['id']}/return", headers=w1).json()
    assert (back["state"], back["worker"], back["submitted_at"]) == (
        "waiting",
        None,
        job["submitted_at"],
    )
    assert client.post("/v1/workers/w1/pull", headers=w1).json()["id"] == job["id"]
    finished = client.post(
        f"/v1/jobs/{job['id']}/finish",
        json={"outcome": "failed", "reason": "exit status 2", "exit_code": 2, "output": "boom"},
        headers=w1,
    ).json()
    assert (finished["exit_code"], finished["output"]) == (2, "boom")
