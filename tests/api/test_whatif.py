"""POST /v1/whatif (issue 24 item 3): a change set applied by the real services in a
savepoint that is rolled back; what it would change, and proof that nothing was stored."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.api.app import create_app
from app.db.engine import Database
from app.settings import Settings
from tests.support.http_api import (
    assert_problem,
    define_license,
    register,
    submit,
)
from tests.support.table_digest import table_digest

JAVA_WORKER = "language: ?java; java: ?11, ?12"


def _whatif(client: TestClient, admin: dict[str, str], body: dict[str, Any]) -> Any:
    return client.post("/v1/whatif", json=body, headers=admin)


def _ok(client: TestClient, admin: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    response = _whatif(client, admin, body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _can_run_now(client: TestClient, admin: dict[str, str], job_id: int) -> bool:
    response = client.get(f"/v1/jobs/{job_id}/explain", headers=admin)
    assert response.status_code == 200, response.text
    # Could start it now, or after the jobs that go first (issue 35: outranked).
    summary = response.json()["summary"]
    return bool(summary["can_run_now"] + summary["outranked"] > 0)


def test_an_added_worker_makes_waiting_jobs_runnable(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "busy", JAVA_WORKER, slots=1)
    running = submit(client, admin_headers, "language: java; java: 12")
    pulled = client.post("/v1/workers/busy/pull", headers=_token(client, admin_headers, "busy"))
    assert pulled.status_code == 200 and pulled.json()["id"] == running["id"], pulled.text
    waiting = submit(client, admin_headers, "language: java; java: 11")
    assert not _can_run_now(client, admin_headers, waiting["id"])
    before = table_digest(database)

    answer = _ok(
        client,
        admin_headers,
        {
            "add_workers": [{"name": "fresh", "resources": JAVA_WORKER, "slots": 2}],
            "add_jobs": [{"resources": "language: java; java: 12"}],
            "explain_job": waiting["id"],
        },
    )

    assert table_digest(database) == before
    added = answer["added_jobs"]
    assert [(j["index"], j["state"]) for j in added] == [(0, "waiting")]
    assert answer["runnable_now"] == sorted([waiting["id"], added[0]["id"]])
    assert answer["no_longer_runnable"] == []
    assert answer["provisional_ids"] is True
    assert answer["explain_job"]["gained"] == ["fresh"]
    assert [c["worker"] for c in answer["explain_job"]["before"]] == ["busy"]
    assert answer["explain_job"]["lost"] == []
    # The new worker would pull the older waiting job first (submission order).
    assert answer["first_pulls"] == [{"worker": "fresh", "job": waiting["id"], "placed": False}]
    assert running["id"] not in answer["runnable_now"]
    assert not _can_run_now(client, admin_headers, waiting["id"])


def _token(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    response = client.post("/v1/tokens", json={"role": "worker", "subject": name}, headers=admin)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def test_draining_the_only_worker_stops_its_jobs_and_counts_them_per_category(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "w1", JAVA_WORKER, slots=2)
    register(client, admin_headers, "w2", "language: ?python", slots=1)
    java = [submit(client, admin_headers, "language: java; java: 11")["id"] for _ in range(3)]
    python = submit(client, admin_headers, "language: python")
    before = table_digest(database)

    answer = _ok(client, admin_headers, {"drain_workers": ["w1"]})

    assert table_digest(database) == before
    assert answer["runnable_now"] == []
    assert answer["no_longer_runnable"] == java
    counts = {c["category_id"]: c for c in answer["categories"]}
    java_category = client.get(f"/v1/jobs/{java[0]}", headers=admin_headers).json()["category_id"]
    assert counts[java_category] == {
        "category_id": java_category,
        "waiting_before": 3,
        "waiting_after": 3,
        "runnable_before": 3,
        "runnable_after": 0,
    }
    assert counts[python["category_id"]]["runnable_after"] == 1
    # A drained worker gets nothing new: its first pull is empty.
    assert answer["first_pulls"] == [{"worker": "w1", "job": None, "placed": False}]
    assert all(_can_run_now(client, admin_headers, job_id) for job_id in java)


def test_removing_a_worker_requeues_its_jobs_onto_the_others(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "w1", JAVA_WORKER, slots=1)
    running = submit(client, admin_headers, "language: java; java: 12")
    pulled = client.post("/v1/workers/w1/pull", headers=_token(client, admin_headers, "w1"))
    assert pulled.status_code == 200, pulled.text
    register(client, admin_headers, "w2", JAVA_WORKER, slots=1)
    before = table_digest(database)

    answer = _ok(
        client,
        admin_headers,
        {"remove_workers": ["w1"], "change_workers": [{"name": "w2", "slots": 3}]},
    )

    assert table_digest(database) == before
    assert answer["requeued"] == [running["id"]]
    assert answer["runnable_now"] == [running["id"]]
    assert answer["first_pulls"] == [{"worker": "w2", "job": running["id"], "placed": False}]
    assert client.get(f"/v1/jobs/{running['id']}", headers=admin_headers).json()["state"] == (
        "running"
    )


def test_a_change_set_that_fails_midway_stores_nothing_and_names_the_item(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """The workers and the first job were applied in the savepoint when the second job's
    notation failed: everything is rolled back."""
    register(client, admin_headers, "w1", JAVA_WORKER)
    submit(client, admin_headers, "language: java; java: 11")
    before = table_digest(database)

    response = _whatif(
        client,
        admin_headers,
        {
            "add_workers": [{"name": "w9", "resources": JAVA_WORKER}],
            "drain_workers": ["w1"],
            "add_jobs": [{"resources": "language: java"}, {"resources": "language: java; java"}],
        },
    )

    problem = assert_problem(response, 422)
    assert problem["errors"][0]["field"] == "body.add_jobs.1.resources"
    assert problem["errors"][0]["notation"] == "momotor-tags"
    assert "position" in problem["errors"][0]
    assert table_digest(database) == before
    assert client.get("/v1/workers/w9", headers=admin_headers).status_code == 404
    assert client.get("/v1/workers/w1", headers=admin_headers).json()["state"] == "active"


def test_refused_items_are_named(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "w1", JAVA_WORKER)
    done = submit(client, admin_headers, "language: cobol")
    before = table_digest(database)
    cases = [
        ({"drain_workers": ["w1", "ghost"]}, "body.drain_workers.1", "no worker named 'ghost'"),
        ({"remove_workers": ["ghost"]}, "body.remove_workers.0", "ghost"),
        (
            {"change_workers": [{"name": "w1", "resources": "a: b: c"}]},
            "body.change_workers.0.resources",
            "escaped",
        ),
        ({"add_workers": [{"name": "w2", "resources": ";;"}]}, "body.add_workers.0.resources", ""),
        ({"explain_job": done["id"]}, "body.explain_job", "candidates are computed for waiting"),
        ({"explain_job": 999_999}, "body.explain_job", "no job with id 999999"),
        # A name to pull with that names no worker (the API fuzz found it a 404).
        ({"pull_workers": ["w1", "ghost"]}, "body.pull_workers.1", "no worker named 'ghost'"),
    ]
    for body, field, words in cases:
        problem = assert_problem(_whatif(client, admin_headers, body), 422)
        assert problem["errors"][0]["field"] == field, (body, problem)
        assert words in problem["detail"], (body, problem)
    # A body the schema refuses names the field as every other route does.
    problem = assert_problem(
        _whatif(client, admin_headers, {"add_jobs": [{}, {"priority": "high"}]}), 422
    )
    assert problem["errors"][0]["field"] == "body.add_jobs.1.priority"
    assert table_digest(database) == before


def test_the_change_set_sizes_are_limited_before_any_work(
    settings: Settings, database: Database, admin_headers: dict[str, str]
) -> None:
    small = settings.model_copy(update={"whatif_max_workers": 2, "whatif_max_jobs": 1})
    with TestClient(create_app(small, database=database)) as client:
        problem = assert_problem(
            _whatif(
                client,
                admin_headers,
                {
                    "drain_workers": ["a", "b"],
                    "remove_workers": ["c"],
                    "add_jobs": [{}, {}],
                },
            ),
            422,
        )
    fields = [e["field"] for e in problem["errors"]]
    assert fields == ["body.add_workers", "body.add_jobs"]
    assert "at most 2" in problem["errors"][0]["message"]
    assert "at most 1" in problem["errors"][1]["message"]


def test_only_an_admin_asks(client: TestClient, admin_headers: dict[str, str]) -> None:
    submitter = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "alice"}, headers=admin_headers
    ).json()["token"]
    response = _whatif(client, {"Authorization": f"Bearer {submitter}"}, {"add_jobs": [{}]})
    assert_problem(response, 403)


def test_the_digest_sees_a_real_change(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """The proof above is worth something only if the digest changes when a row does."""
    register(client, admin_headers, "w1", JAVA_WORKER)
    before = table_digest(database)
    assert client.patch("/v1/workers/w1", json={"state": "draining"}, headers=admin_headers)
    assert table_digest(database) != before


PER_USER_ONE_SLOT = """{
   name         per_user
   enabled      TRUE
   limit        users {*} to slots=1
}
"""


def test_a_larger_global_capacity_lets_a_waiting_job_run(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """complex(5): a consumable's capacity at the global host is shared by every host; one
    more license (qconf -me global) lets the job that waits for it run."""
    define_license(client, admin_headers)
    client.put("/v1/values/global", json={"complex_values": {"lic": "1"}}, headers=admin_headers)
    worker = register(client, admin_headers, "h1", slots=2)
    running = submit(client, admin_headers, hard="lic=1")
    pulled = client.post("/v1/workers/h1/pull", headers=worker)
    assert pulled.status_code == 200 and pulled.json()["id"] == running["id"], pulled.text
    waiting = submit(client, admin_headers, hard="lic=1")
    assert not _can_run_now(client, admin_headers, waiting["id"])
    before = table_digest(database)

    answer = _ok(
        client,
        admin_headers,
        {"set_values": [{"level": "global", "complex_values": {"lic": "2"}}]},
    )

    assert table_digest(database) == before
    assert answer["runnable_now"] == [waiting["id"]]
    assert answer["no_longer_runnable"] == []
    # A host's own values make its first pull part of the answer.
    on_host = _ok(
        client,
        admin_headers,
        {
            "set_values": [
                {"level": "global", "complex_values": {"lic": "2"}},
                {"level": "host", "host": "h1", "load_values": {"arch": "lx-amd64"}},
            ]
        },
    )
    assert on_host["first_pulls"] == [{"worker": "h1", "job": waiting["id"], "placed": False}]
    assert client.get("/v1/values/global", headers=admin_headers).json()["complex_values"] == {
        "lic": "1"
    }


def test_a_new_quota_set_stops_a_users_second_job(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """sge_resource_quota(5): ``limit users {*} to slots=1`` holds each user to one slot, the
    running job counted at once; removing the set (qconf -drqs) gives the slot back."""
    worker = register(client, admin_headers, "h1", slots=2)
    running = submit(client, admin_headers, hard="h_rt=60")
    pulled = client.post("/v1/workers/h1/pull", headers=worker)
    assert pulled.status_code == 200 and pulled.json()["id"] == running["id"], pulled.text
    waiting = submit(client, admin_headers, hard="h_rt=60")
    assert _can_run_now(client, admin_headers, waiting["id"])
    before = table_digest(database)

    added = _ok(client, admin_headers, {"add_quota_sets": [{"text": PER_USER_ONE_SLOT}]})
    assert added["no_longer_runnable"] == [waiting["id"]]
    assert added["runnable_now"] == []
    assert table_digest(database) == before

    stored = client.post("/v1/quotas", json={"text": PER_USER_ONE_SLOT}, headers=admin_headers)
    assert stored.status_code == 201, stored.text
    assert not _can_run_now(client, admin_headers, waiting["id"])
    looser = PER_USER_ONE_SLOT.replace("slots=1", "slots=2")
    for change in ({"replace_quota_sets": [{"text": looser}]}, {"remove_quota_sets": ["per_user"]}):
        assert _ok(client, admin_headers, change)["runnable_now"] == [waiting["id"]], change
    assert client.get("/v1/quotas/per_user", headers=admin_headers).json()["rules"][0][
        "limits"
    ] == [{"attribute": "slots", "value": "1"}]


def test_refused_values_and_quota_items_are_named(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    register(client, admin_headers, "h1")
    before = table_digest(database)
    refusals = [
        ({"set_values": [{"level": "host", "complex_values": {}}]}, "body.set_values.0"),
        (
            {"set_values": [{"level": "global", "host": "h1", "complex_values": {}}]},
            "body.set_values.0",
        ),
        (
            {"set_values": [{"level": "host", "host": "nope", "load_values": {}}]},
            "body.set_values.0",
        ),
        (
            {"set_values": [{"level": "global", "complex_values": {"no_such": "1"}}]},
            "body.set_values.0",
        ),
        (
            {"add_quota_sets": [{"text": "{\n name q\n limit to slots=\n}\n"}]},
            "body.add_quota_sets.0",
        ),
        ({"replace_quota_sets": [{"text": PER_USER_ONE_SLOT}]}, "body.replace_quota_sets.0"),
        ({"remove_quota_sets": ["per_user"]}, "body.remove_quota_sets.0"),
    ]
    for body, field in refusals:
        response = _whatif(client, admin_headers, body)
        problem = assert_problem(response, 422)
        fields = [error["field"] for error in problem["errors"]]
        assert any(f.startswith(field) for f in fields), (body, problem)
    assert table_digest(database) == before
