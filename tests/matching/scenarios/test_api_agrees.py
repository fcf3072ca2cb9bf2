"""The scenario runner and the HTTP API give the same outcome: every Momotor, Flux and
debusine case is replayed request by request through the API (``POST /v1/tasks``,
``/v1/workers``, the metadata routes, ``/v1/jobs``, candidates, explain, allocate, pull,
allocation) on the same database, and the outcome read from the answers must equal the
runner's, whole. So a scenario cannot pass while the API disagrees."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.matching.scenarios.run import run_case
from tests.matching.scenarios.test_families import CASES

pytestmark = pytest.mark.db


def _ok(response: Any) -> Any:
    assert response.status_code < 300, response.text
    return response.json() if response.status_code != 204 else None


def _register(client: TestClient, admin: dict[str, str], cluster: dict[str, Any]) -> dict[str, str]:
    """The cluster as an admin and the workers would set it up; each worker's token."""
    for task in cluster.get("tasks", []):
        _ok(client.post("/v1/tasks", json=task, headers=admin))
    tokens = {}
    for entry in cluster["workers"]:
        body = {k: v for k, v in entry.items() if not k.endswith("_metadata")}
        name = body["name"]
        tokens[name] = _ok(client.post("/v1/workers", json=body, headers=admin))["token"]
        if "static_metadata" in entry:
            static = {"metadata": entry["static_metadata"]}
            _ok(client.put(f"/v1/workers/{name}/metadata", json=static, headers=admin))
        if "dynamic_metadata" in entry:
            own = {"Authorization": f"Bearer {tokens[name]}"}
            dynamic = {"metadata": entry["dynamic_metadata"]}
            _ok(client.post(f"/v1/workers/{name}/metadata", json=dynamic, headers=own))
    return tokens


def _submit(client: TestClient, admin: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=body, headers=admin)
    if response.status_code == 422:
        return {"submit": "rejected", "refused": response.json()["detail"]}
    job = _ok(response)
    outcome: dict[str, Any] = {"submit": "accepted", "id": job["id"]}
    if job["failure_reason"] is not None:
        outcome["refused"] = job["failure_reason"]
    ranked = []
    if job["state"] == "waiting":
        ranked = _ok(client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin))["items"]
    explained = _ok(client.get(f"/v1/jobs/{job['id']}/explain", headers=admin))["workers"]
    outcome["candidates"] = [c["worker"] for c in ranked]
    outcome["strengths"] = {c["worker"]: c["strength_name"] for c in ranked}
    # Outranked (issue 35): it could run the job, after the jobs that go first.
    outcome["reasons"] = {
        w["worker"]: None if w.get("answer") == "outranked" else w["reason"] for w in explained
    }
    return outcome


def outcome_over_http(
    client: TestClient, admin: dict[str, str], case: dict[str, Any]
) -> dict[str, Any]:
    tokens = _register(client, admin, case["cluster"])
    jobs: dict[str, dict[str, Any]] = {}
    for number, body in enumerate(case["jobs"], start=1):
        label = body.get("label", f"j{number}")
        jobs[label] = _submit(client, admin, {k: v for k, v in body.items() if k != "label"})
    ids = {outcome.pop("id"): label for label, outcome in jobs.items() if "id" in outcome}
    label_ids = {label: job_id for job_id, label in ids.items()}
    result: dict[str, Any] = {"jobs": jobs}
    if "allocate" in case:
        result["allocate"] = []
        for label in case["allocate"]:
            response = client.post(f"/v1/jobs/{label_ids[label]}/allocate", headers=admin)
            if response.status_code == 409:
                result["allocate"].append({"job": label, "refused": response.json()["detail"]})
            else:
                result["allocate"].append({"job": label, "worker": _ok(response)["worker"]})
    if "pulls" in case:
        result["pull_order"] = []
        for name in case["pulls"]:
            own = {"Authorization": f"Bearer {tokens[name]}"}
            job = _ok(client.post(f"/v1/workers/{name}/pull", headers=own))
            result["pull_order"].append({"worker": name, "job": job and ids[job["id"]]})
    result["allocations"] = {}
    for job_id, label in ids.items():
        job = _ok(client.get(f"/v1/jobs/{job_id}", headers=admin))
        jobs[label].update(state=job["state"], worker=job["worker"])
        held = _ok(client.get(f"/v1/jobs/{job_id}/allocation", headers=admin))["R_lite"]
        if held:
            result["allocations"][label] = held
    return result


def _without_ids(outcome: dict[str, Any]) -> str:
    """The outcome as text, job ids in messages blanked: on PostgreSQL the runner's rolled
    back transaction still used up the ids it drew, so the API's jobs get others."""
    return re.sub(r"job \d+", "job N", json.dumps(outcome, indent=1, sort_keys=True))


@pytest.mark.parametrize("case", CASES, ids=lambda case: str(case["id"]))
def test_the_api_gives_the_runners_outcome(
    client: TestClient, database: Database, admin_headers: dict[str, str], case: dict[str, Any]
) -> None:
    expected = run_case(database, case)  # rolled back: the tables are empty again
    assert _without_ids(outcome_over_http(client, admin_headers, case)) == _without_ids(expected)
