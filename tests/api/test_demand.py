"""GET /v1/demand and the worker templates (issue 40): why each category of waiting work
waits (never, capacity, policy, ready), what it would take, and with templates which new
workers would start what, simulated by the real services in a savepoint."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.support.http_api import register, submit
from tests.support.table_digest import table_digest

JAVA11 = "language: ?java; java: ?11"
JAVA12 = "language: ?java; java: ?12"
NODE = {"inventory": "node/[core=8]", "slots": 8}


def _demand(client: TestClient, admin: dict[str, str], query: str = "") -> dict[str, Any]:
    response = client.get(f"/v1/demand{query}", headers=admin)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _by_category(answer: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {item["category_id"]: item for item in answer["items"]}


def _pull(client: TestClient, admin: dict[str, str], worker: str) -> int | None:
    token = client.post("/v1/tokens", json={"role": "worker", "subject": worker}, headers=admin)
    assert token.status_code == 201, token.text
    headers = {"Authorization": f"Bearer {token.json()['token']}"}
    pulled = client.post(f"/v1/workers/{worker}/pull", headers=headers)
    assert pulled.status_code in (200, 204), pulled.text
    return int(pulled.json()["id"]) if pulled.status_code == 200 else None


def _node(client: TestClient, admin: dict[str, str], name: str) -> None:
    response = client.post("/v1/workers", json={"name": name, **NODE}, headers=admin)
    assert response.status_code == 201, response.text


def _cluster(client: TestClient, admin: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Issue 40's cluster: a java-12 worker, a busy java-11 worker, two nodes with
    inventories; jobs for java 11 (two waiting), java 12, java 17 and a 3-node shape."""
    register(client, admin, "j12", JAVA12)
    register(client, admin, "j11", JAVA11)
    _node(client, admin, "n1")
    _node(client, admin, "n2")
    running = submit(client, admin, "language: java; java: 11")
    assert _pull(client, admin, "j11") == running["id"]
    jobs = {
        "java11": submit(client, admin, "language: java; java: 11"),
        "java11b": submit(client, admin, "language: java; java: 11"),
        "java12": submit(client, admin, "language: java; java: 12"),
        "java17": submit(client, admin, "language: java; java: 17"),
        "three": submit(client, admin, "", shape="node=3/slot/core=8"),
    }
    return jobs


def test_demand_says_never_capacity_and_ready(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    jobs = _cluster(client, admin_headers)
    assert jobs["java17"]["state"] == "failed"  # no template yet: debusine's rule
    before = table_digest(database)
    answer = _demand(client, admin_headers)
    assert table_digest(database) == before
    found = _by_category(answer)
    java11 = found[jobs["java11"]["category_id"]]
    assert (java11["answer"], java11["waiting"]) == ("capacity", 2)
    assert java11["need"] == {"slots": 2, "nodes": 2, "vertices": {}}
    assert found[jobs["java12"]["category_id"]]["answer"] == "ready"
    three = found[jobs["three"]["category_id"]]
    assert three["answer"] == "never"
    assert "needs 3 nodes" in three["reasons"][0]
    assert three["need"]["vertices"] == {"core": 24}
    assert answer["jobs"] == {"never": 1, "capacity": 2, "policy": 0, "ready": 1}
    assert answer["suggestion"] is None


JAVA17_BOX = {"resources": "language: ?java; java: ?17", "slots": 4, "cost": 1.0}
NODE_8CORE = {**NODE, "cost": 3.0}


def _put(client: TestClient, admin: dict[str, str], name: str, body: dict[str, Any]) -> Any:
    return client.put(f"/v1/templates/{name}", json=body, headers=admin)


def test_templates_suggest_one_of_each_and_they_start_exactly_those_jobs(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """Issue 40's "Done when": java17-box and node-8core; the mix is one of each, and
    registered for real they start the java-17 job and the 3-node job, nothing else."""
    assert _put(client, admin_headers, "java17-box", JAVA17_BOX).status_code == 201
    assert _put(client, admin_headers, "node-8core", NODE_8CORE).status_code == 201
    jobs = _cluster(client, admin_headers)
    # With a template that could run it, the java-17 job waits instead of failing.
    assert jobs["java17"]["state"] == "waiting"
    before = table_digest(database)
    answer = _demand(client, admin_headers, "?templates=*")
    assert table_digest(database) == before
    found = _by_category(answer)
    java17 = found[jobs["java17"]["category_id"]]
    assert java17["answer"] == "never"
    assert java17["reasons"] == [
        "no worker offers tag '17' in group 'java'",
        "waiting for a worker like template java17-box",
    ]
    assert java17["template"] == "java17-box"
    assert found[jobs["three"]["category_id"]]["template"] == "node-8core"
    suggestion = answer["suggestion"]
    assert [(m["template"], m["workers"]) for m in suggestion["mix"]] == [
        ("java17-box", 1),
        ("node-8core", 1),
    ]
    assert (suggestion["workers"], suggestion["cost"], suggestion["starts"]) == (2, 4.0, 2)
    # The java-11 jobs wait for room that no template offers.
    assert suggestion["unrunnable"] == [
        {"category_id": jobs["java11"]["category_id"], "jobs": 2, "beyond_limits": False}
    ]

    register(client, admin_headers, "java17-1", JAVA17_BOX["resources"], slots=4)
    _node(client, admin_headers, "n3")
    started = client.post(f"/v1/jobs/{jobs['three']['id']}/allocate", headers=admin_headers)
    assert started.status_code == 200, started.text
    assert _pull(client, admin_headers, "java17-1") == jobs["java17"]["id"]
    assert _pull(client, admin_headers, "java17-1") is None
    assert _pull(client, admin_headers, "n3") is None
    after = _demand(client, admin_headers, "?templates=*")
    assert after["jobs"] == {"never": 0, "capacity": 2, "policy": 0, "ready": 1}
