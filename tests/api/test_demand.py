"""GET /v1/demand and the worker templates (issue 40): why each category of waiting work
waits (never, capacity, policy, ready), what it would take, and with templates which new
workers would start what, simulated by the real services in a savepoint."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.support.http_api import assert_problem, register, submit
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
    assert java11["need"] == {"slots": 2, "nodes": 2, "vertices": {}, "consumables": {}}
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

    explained = client.get(f"/v1/jobs/{jobs['java17']['id']}/explain", headers=admin_headers)
    assert explained.json()["summary"]["suggestion"] == (
        "waiting for a worker like template java17-box"
    )

    register(client, admin_headers, "java17-1", JAVA17_BOX["resources"], slots=4)
    _node(client, admin_headers, "n3")
    started = client.post(f"/v1/jobs/{jobs['three']['id']}/allocate", headers=admin_headers)
    assert started.status_code == 200, started.text
    assert _pull(client, admin_headers, "java17-1") == jobs["java17"]["id"]
    assert _pull(client, admin_headers, "java17-1") is None
    assert _pull(client, admin_headers, "n3") is None
    after = _demand(client, admin_headers, "?templates=*")
    assert after["jobs"] == {"never": 0, "capacity": 2, "policy": 0, "ready": 1}


def test_an_array_held_by_its_task_concurrency_waits_for_policy(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """qsub -tc holds the second task of a -tc 1 array though its worker has room: the
    answer is policy, not capacity (adding workers would not start it)."""
    register(client, admin_headers, "w", JAVA11, slots=2)
    answer = client.post(
        "/v1/jobs/bulk",
        json={"jobs": [{"resources": "java: 11", "tasks": "1-2", "task_concurrency": 1}]},
        headers=admin_headers,
    )
    assert answer.status_code == 201, answer.text
    first, _second = (job["id"] for job in answer.json()["jobs"])
    assert _pull(client, admin_headers, "w") == first
    (item,) = _demand(client, admin_headers)["items"]
    assert (item["answer"], item["waiting"]) == ("policy", 1)
    assert "-tc" in item["reasons"][0]


def test_without_templates_a_job_no_worker_fits_still_fails_at_submission(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """debusine's rule ("No suitable worker found", debusine issue #8) stands without
    templates; a template that could not run the job does not change it either."""
    register(client, admin_headers, "w", JAVA11)
    failed = submit(client, admin_headers, "language: java; java: 17")
    assert (failed["state"], failed["failure_reason"]) == ("failed", "No suitable worker found")
    assert _put(client, admin_headers, "py", {"resources": "python: ?3"}).status_code == 201
    still = submit(client, admin_headers, "language: java; java: 17")
    assert still["state"] == "failed"
    assert _put(client, admin_headers, "j17", JAVA17_BOX).status_code == 201
    waits = submit(client, admin_headers, "language: java; java: 17")
    assert waits["state"] == "waiting"
    # The templates simulated in savepoints left no worker behind.
    names = [w["name"] for w in client.get("/v1/workers", headers=admin_headers).json()["items"]]
    assert names == ["w"]


def test_templates_are_stored_listed_replaced_and_deleted(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    created = _put(client, admin_headers, "java17-box", JAVA17_BOX)
    assert created.status_code == 201, created.text
    assert created.json() == {
        "name": "java17-box",
        "resources": "language: ?java; java: ?17",
        "slots": 4,
        "state": "active",
        "queues": None,
        "properties": [],
        "inventory": None,
        "cost": 1.0,
        "max_count": None,
    }
    replaced = _put(client, admin_headers, "java17-box", {**JAVA17_BOX, "max_count": 3})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["max_count"] == 3
    assert _put(client, admin_headers, "node-8core", NODE_8CORE).status_code == 201
    listed = client.get("/v1/templates", headers=admin_headers).json()
    assert [t["name"] for t in listed["items"]] == ["java17-box", "node-8core"]
    one = client.get("/v1/templates/node-8core", headers=admin_headers).json()
    assert (one["inventory"], one["slots"], one["cost"]) == ("node/[core=8]", 8, 3.0)
    assert client.delete("/v1/templates/node-8core", headers=admin_headers).status_code == 204
    assert_problem(client.get("/v1/templates/node-8core", headers=admin_headers), 404)
    assert_problem(client.delete("/v1/templates/node-8core", headers=admin_headers), 404)
    # Admin only.
    assert_problem(client.get("/v1/templates"), 401)
    assert_problem(client.get("/v1/demand"), 401)


def test_a_template_is_refused_as_a_registration_would_be(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    before = table_digest(database)
    cases = [
        ({"resources": "a: x, ?x"}, "body.resources"),
        ({"inventory": "node/[core="}, "body.inventory"),
        ({"slots": -1}, "body.slots"),
        ({"cost": -2.0}, "body.cost"),
        ({"max_count": "many"}, "body.max_count"),
        ({"name": "w1"}, "body.name"),
        ({"rank": 3}, "body.rank"),
    ]
    for body, field in cases:
        problem = assert_problem(_put(client, admin_headers, "t", body), 422)
        assert [error["field"] for error in problem["errors"]] == [field], (body, problem)
    assert_problem(_put(client, admin_headers, "bad name!", {}), 422)
    assert table_digest(database) == before


def test_demand_refuses_bad_template_lists_before_any_work(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    unknown = assert_problem(client.get("/v1/demand?templates=nope", headers=admin_headers), 422)
    assert unknown["errors"][0]["field"] == "query.templates"
    assert "nope" in unknown["errors"][0]["message"]
    bad = assert_problem(client.get("/v1/demand?templates=a,,b", headers=admin_headers), 422)
    assert "item 2" in bad["errors"][0]["message"]
    many = ",".join(f"t{i}" for i in range(65))
    assert_problem(client.get(f"/v1/demand?templates={many}", headers=admin_headers), 422)
    assert_problem(client.get("/v1/demand?limit=0", headers=admin_headers), 422)


def test_demand_pages_its_categories_and_totals_them_all(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    drained = {"name": "w", "resources": "java: ?11, ?12, ?13", "state": "draining"}
    assert client.post("/v1/workers", json=drained, headers=admin_headers).status_code == 201
    for version in (11, 12, 13):
        submit(client, admin_headers, f"java: {version}")
    first = _demand(client, admin_headers, "?limit=2")
    assert [i["request"]["resources"] for i in first["items"]] == ["java:11", "java:12"]
    assert (first["next_offset"], first["categories"]) == (2, 3)
    assert first["jobs"] == {"never": 0, "capacity": 3, "policy": 0, "ready": 0}
    rest = _demand(client, admin_headers, "?limit=2&offset=2")
    assert [i["request"]["resources"] for i in rest["items"]] == ["java:13"]
    assert rest["next_offset"] is None
