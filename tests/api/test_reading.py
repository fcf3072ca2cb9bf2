"""Reading what the API lets one write (issue 21): categories and their fit, the Grid Engine
values of every level, parallel environments; every list the same page shape, filtered
before it is paginated; candidates only for waiting jobs."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.engine import Database
from tests.support.http_api import assert_problem, register, submit


def _submitter(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    issued = client.post("/v1/tokens", json={"role": "submitter", "subject": name}, headers=admin)
    assert issued.status_code == 201, issued.text
    return {"Authorization": f"Bearer {issued.json()['token']}"}


def _pages(
    client: TestClient, url: str, headers: dict[str, str], limit: int, **filters: object
) -> list[Any]:
    """Every page of a listing; each page but the last is full."""
    items: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        params = {**filters, "limit": limit, "offset": offset}
        page = client.get(url, params=params, headers=headers).json()
        assert set(page) == {"items", "limit", "offset", "next_offset"}
        if page["next_offset"] is not None:
            assert len(page["items"]) == limit, page
        items += page["items"]
        offset = page["next_offset"]
    return items


def test_a_submitter_sees_exactly_its_own_jobs_on_every_page(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    """The bug of the issue: the ownership filter ran after pagination, so alice's page
    of two could be empty although her jobs exist."""
    register(client, admin_headers, "w1", "language: ?java")
    alice, bob = (_submitter(client, admin_headers, who) for who in ("alice", "bob"))
    owners = ["bob", "bob", "alice", "bob", "bob", "bob", "alice", "alice", "bob", "alice"]
    ids = {"alice": [], "bob": []}  # type: dict[str, list[int]]
    for owner in owners:
        job = client.post(
            "/v1/jobs",
            json={"resources": "language: java"},
            headers=alice if owner == "alice" else bob,
        ).json()
        ids[owner].append(job["id"])
    for limit in (1, 2, 3):
        seen = _pages(client, "/v1/jobs", alice, limit)
        assert [job["id"] for job in seen] == ids["alice"], limit
        assert {job["submitter"] for job in seen} == {"alice"}
    first = client.get("/v1/jobs", params={"limit": 2}, headers=alice).json()
    assert [job["id"] for job in first["items"]] == ids["alice"][:2]
    assert [j["id"] for j in _pages(client, "/v1/jobs", admin_headers, 4)] == sorted(
        ids["alice"] + ids["bob"]
    )


def test_jobs_filter_by_state_and_category(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    worker = register(client, admin_headers, "w1", "language: ?java, ?python")
    java = [submit(client, admin_headers, "language: java") for _ in range(3)]
    python = submit(client, admin_headers, "language: python")
    pulled = client.post("/v1/workers/w1/pull", headers=worker).json()
    assert pulled["id"] == java[0]["id"]
    category = java[0]["category_id"]
    waiting_java = _pages(client, "/v1/jobs", admin_headers, 1, state="waiting", category=category)
    assert [j["id"] for j in waiting_java] == [java[1]["id"], java[2]["id"]]
    running = _pages(client, "/v1/jobs", admin_headers, 1, state="running")
    assert [j["id"] for j in running] == [java[0]["id"]]
    other = _pages(client, "/v1/jobs", admin_headers, 5, category=python["category_id"])
    assert [j["id"] for j in other] == [python["id"]]


def test_categories_show_requests_counts_and_fit(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java", slots=2)
    register(client, admin_headers, "w2", "language: ?python")
    java = [submit(client, admin_headers, "language: java") for _ in range(2)]
    client.post("/v1/workers/w1/pull", headers=worker)
    flux = submit(client, admin_headers, "", requires="ssd")
    assert flux["state"] == "failed"

    listed = _pages(client, "/v1/categories", admin_headers, 1)
    assert [c["id"] for c in listed] == [java[0]["category_id"], flux["category_id"]]
    first = listed[0]
    assert first["request"]["resources"] == "language:java"  # canonical text
    assert first["request"]["slots"] == 1 and first["request"]["constraint"] is None
    assert (first["waiting"], first["running"], first["fitting_workers"]) == (1, 1, 1)
    assert listed[1]["request"]["constraint"] == {"properties": ["ssd"]}

    detail = client.get(f"/v1/categories/{first['id']}", headers=admin_headers).json()
    by_worker = {w["worker"]: w for w in detail["workers"]}
    assert by_worker["w1"] == {
        "worker": "w1",
        "state": "active",
        "fits": True,
        "reason": None,
        "message": None,
    }
    assert by_worker["w2"]["fits"] is False
    assert by_worker["w2"]["reason"] == "job-requires-tag"
    assert by_worker["w2"]["message"] == "the job requires a tag the worker does not offer"
    # The same answers as the SQL view the issue says people used instead.
    with database.transaction() as session:
        view = {
            name: (bool(fits), reason)
            for name, fits, reason in session.execute(
                text("SELECT worker_name, fits, reason FROM v_category_fit WHERE category_id = :c"),
                {"c": first["id"]},
            )
        }
    assert view == {w["worker"]: (w["fits"], w["reason"]) for w in detail["workers"]}
    assert_problem(client.get("/v1/categories/999999", headers=admin_headers), 404)
    submitter = _submitter(client, admin_headers, "alice")
    assert client.get(f"/v1/categories/{first['id']}", headers=submitter).status_code == 200


def test_every_value_that_can_be_put_can_be_read(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    lic = {"name": "lic", "shortcut": "lic", "type": "INT", "relop": "<=", "consumable": "YES"}
    assert client.post("/v1/attributes", json=lic, headers=admin_headers).status_code == 201
    worker = register(client, admin_headers, "h1", slots=2)
    puts = {
        "/v1/values/global": {"complex_values": {"lic": "3"}},
        "/v1/values/hosts/h1": {"complex_values": {"lic": "2"}, "load_values": {"load_avg": "0.5"}},
        "/v1/values/queues/default/h1": {"attributes": {"h_rt": "3600"}},
    }
    for url, body in puts.items():
        assert client.put(url, json=body, headers=admin_headers).status_code == 200, url
    submit(client, admin_headers, hard="lic=1")
    assert client.post("/v1/workers/h1/pull", headers=worker).status_code == 200

    global_values = client.get("/v1/values/global", headers=admin_headers).json()
    assert global_values["complex_values"] == {"lic": "3"}
    assert global_values["consumables"] == {"lic": {"capacity": 3.0, "used": 1.0}}
    host = client.get("/v1/values/hosts/h1", headers=admin_headers).json()
    assert host["complex_values"] == {"lic": "2"} and host["load_values"] == {"load_avg": "0.5"}
    assert host["consumables"] == {"lic": {"capacity": 2.0, "used": 1.0}}
    queue = client.get("/v1/values/queues/default/h1", headers=admin_headers).json()
    assert queue["attributes"]["h_rt"] == "3600"
    assert queue["complex_values"] == {} and queue["load_values"] == {}
    assert_problem(client.get("/v1/values/hosts/nobody", headers=admin_headers), 404)
    assert_problem(client.get("/v1/values/queues/nope/h1", headers=admin_headers), 404)

    pe = client.put("/v1/pes/mpi", json={"allocation_rule": "$fill_up"}, headers=admin_headers)
    assert pe.status_code == 200
    assert client.get("/v1/pes/mpi", headers=admin_headers).json() == pe.json()
    assert_problem(client.get("/v1/pes/nope", headers=admin_headers), 404)


def test_every_list_is_a_page(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    for name in ("a", "b", "c"):
        client.put(f"/v1/pes/{name}", json={"allocation_rule": "1"}, headers=admin_headers)
        client.post("/v1/tasks", json={"name": f"task{name}"}, headers=admin_headers)
    assert [p["name"] for p in _pages(client, "/v1/pes", admin_headers, 2)] == ["a", "b", "c"]
    tasks = _pages(client, "/v1/tasks", admin_headers, 2)
    assert [t["name"] for t in tasks] == ["taska", "taskb", "taskc"]
    attributes = _pages(client, "/v1/attributes", admin_headers, 20)
    assert len(attributes) == 51
    assert [a["name"] for a in attributes] == sorted(a["name"] for a in attributes)
    # No operation answers a bare array any more.
    paths = client.get("/openapi.json").json()["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            content = operation["responses"].get("200", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema", {})
            assert schema.get("type") != "array", (method, path)


def test_candidates_say_what_a_job_that_does_not_wait_is(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    job = submit(client, admin_headers, "language: java")
    assert client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).status_code == 200
    client.post("/v1/workers/w1/pull", headers=worker)
    problem = assert_problem(
        client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers), 409
    )
    assert problem["detail"] == (
        f"job {job['id']} is running on w1; candidates are computed for waiting jobs"
    )
    client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=worker)
    problem = assert_problem(
        client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers), 409
    )
    assert problem["detail"].startswith(f"job {job['id']} is finished;")
