"""The HTTP contract of the matching core (issue 4), on both databases."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Category, Job
from tests.support.http_api import assert_problem, register, submit

DOCS_WORKER = "language: ?java, ?python\njava: ?8, ?11, ?12, ?13\npython: ?3.6, ?3.7"

#: Momotor's documentation: its six jobs against its worker.
DOCS_JOBS = [
    ("language: java\njava: 12", 0.0),
    ("language: java\njava: 14", None),
    ("language: java\njava: ?14", 0.0),
    ("arch: x86", None),
    ("arch: ?x86", 0.0),
    ("arch: ~x86", 0.0),
]


@pytest.mark.parametrize(("job", "strength"), DOCS_JOBS, ids=[j for j, _ in DOCS_JOBS])
def test_momotor_documentation_jobs(
    client: TestClient,
    admin_headers,
    job: str,  # type: ignore[no-untyped-def]
    strength: float | None,
) -> None:
    register(client, admin_headers, "docs-worker", DOCS_WORKER)
    body = submit(client, admin_headers, job)
    assert body["state"] == ("waiting" if strength is not None else "failed")
    answer = client.get(f"/v1/jobs/{body['id']}/candidates", headers=admin_headers)
    if strength is None:
        assert body["failure_reason"] == "No suitable worker found"
        # Candidates are for waiting jobs; a failed one is told as it is (issue 21).
        problem = assert_problem(answer, 409)
        assert problem["detail"] == (
            f"job {body['id']} is failed (No suitable worker found); "
            "candidates are computed for waiting jobs"
        )
    else:
        assert body["failure_reason"] is None
        items = answer.json()["items"]
        assert [(i["worker"], i["strength"]) for i in items] == [("docs-worker", strength)]


def test_registration_and_update(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    created = client.post(
        "/v1/workers", json={"name": "w1", "resources": "a: ?x", "slots": 2}, headers=admin_headers
    )
    assert created.status_code == 201
    assert created.json()["token"].startswith("jm_")
    assert created.json()["queues"] == [{"queue": "default", "slots": 2, "used_slots": 0}]
    updated = client.post(
        "/v1/workers?replace=true",
        json={"name": "w1", "resources": "a: ?y", "slots": 2},
        headers=admin_headers,
    )
    assert updated.status_code == 200
    assert updated.json()["token"] is None and updated.json()["token_kept"] is True
    assert updated.json()["generation"] == 2
    page = client.get("/v1/workers", headers=admin_headers).json()
    assert [w["name"] for w in page["items"]] == ["w1"]
    assert client.get("/v1/workers/w1", headers=admin_headers).json()["resources"] == "a: ?y"
    assert_problem(client.get("/v1/workers/nope", headers=admin_headers), 404)


def test_strengths_are_lossless_with_infinities(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    register(client, admin_headers, "strongest", "a: x")
    register(client, admin_headers, "weakest", "a: ?x")
    job = submit(client, admin_headers, "a: ?x")
    items = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()["items"]
    assert [(i["worker"], i["strength"], i["strength_name"]) for i in items] == [
        ("strongest", 1.0, "WEAK"),
        ("weakest", "Infinity", "WEAKEST"),
    ]
    job = submit(client, admin_headers, "a: x")
    items = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()["items"]
    assert [(i["worker"], i["strength"]) for i in items] == [
        ("strongest", "-Infinity"),
        ("weakest", -1.0),
    ]


def test_bad_notation_is_422_and_nothing_is_stored(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    register(client, admin_headers, "w")
    body = assert_problem(
        client.post("/v1/jobs", json={"resources": "a: x:y"}, headers=admin_headers), 422
    )
    error = body["errors"][0]
    assert error["field"] == "body.resources"
    assert error["notation"] == "momotor-tags"
    assert error["position"] == 4
    assert error["expected"]
    assert_problem(
        client.post("/v1/jobs", json={"resources": "a: x", "slots": 0}, headers=admin_headers), 422
    )
    assert_problem(
        client.post("/v1/jobs", json={"resources": "a: x", "surprise": 1}, headers=admin_headers),
        422,
    )
    bad_worker = client.post(
        "/v1/workers", json={"name": "w2", "resources": "a: x, ?x"}, headers=admin_headers
    )
    assert assert_problem(bad_worker, 422)["errors"][0]["field"] == "body.resources"
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0
        assert session.scalar(select(func.count()).select_from(Category)) == 0


def test_explain_names_every_failing_clause(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    register(client, admin_headers, "w", "language: ~java, ?python; gpu: cuda")
    job = submit(client, admin_headers, "language: java; arch: x86")
    one = client.get(f"/v1/jobs/{job['id']}/explain?worker=w", headers=admin_headers).json()
    (worker,) = one["workers"]
    assert worker["eligible"] is False and worker["misfit_reason"] == "job-requires-tag"
    messages = [c["message"] for c in worker["clauses"]]
    assert messages == [
        # Job groups in the job's order, then groups only the worker names.
        "the job requires tag 'java' in group 'language'; the worker excludes it",
        "the job requires tag 'x86' in group 'arch'; the worker does not offer it",
        "the worker only runs jobs that ask for tag 'cuda' in group 'gpu'; this job does not",
    ]
    everyone = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert [w["worker"] for w in everyone["workers"]] == ["w"]
    assert_problem(
        client.get(f"/v1/jobs/{job['id']}/explain?worker=zz", headers=admin_headers), 404
    )


def test_dry_run_match_stores_nothing(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    register(client, admin_headers, "w", "a: ?x")
    response = client.post("/v1/match", json={"resources": "a: x"}, headers=admin_headers)
    assert response.status_code == 200
    assert response.json() == {
        "job": None,
        "items": [
            {
                "worker": "w",
                "strength": -1.0,
                "strength_name": "STRONG",
                "free_slots": 1,
                "state": "active",
            }
        ],
    }
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(Category)) == 0
        assert session.scalar(select(func.count()).select_from(Job)) == 0


def test_pull_and_finish_over_http(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    w1 = register(client, admin_headers, "w1")
    w2 = register(client, admin_headers, "w2")
    job = submit(client, admin_headers)
    assert_problem(client.post("/v1/workers/w1/pull", headers=w2), 403)
    assert_problem(client.post("/v1/workers/w1/pull", headers=admin_headers), 403)
    pulled = client.post("/v1/workers/w1/pull", headers=w1)
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]
    assert pulled.json()["worker"] == "w1" and pulled.json()["state"] == "running"
    assert client.post("/v1/workers/w1/pull", headers=w1).status_code == 204
    assert_problem(
        client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=w2), 403
    )
    assert_problem(
        client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "meh"}, headers=w1), 422
    )
    done = client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=w1)
    assert done.status_code == 200 and done.json()["state"] == "finished"
    # A resend after a lost reply is answered as the first (issue 19); another outcome is not.
    again = client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "finished"}, headers=w1)
    assert again.status_code == 200 and again.json() == done.json()
    assert_problem(
        client.post(f"/v1/jobs/{job['id']}/finish", json={"outcome": "failed"}, headers=w1), 409
    )


def test_jobs_listing_cancel_and_submitter_scope(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    register(client, admin_headers, "w")
    alice = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "alice"}, headers=admin_headers
    ).json()["token"]
    bob = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "bob"}, headers=admin_headers
    ).json()["token"]
    alice_h, bob_h = ({"Authorization": f"Bearer {t}"} for t in (alice, bob))
    mine = submit(client, alice_h)
    assert mine["submitter"] == "alice"
    submit(client, admin_headers, "nope: x")  # fails at once: no worker offers it
    assert_problem(client.get(f"/v1/jobs/{mine['id']}", headers=bob_h), 403)
    assert_problem(client.post(f"/v1/jobs/{mine['id']}/cancel", headers=bob_h), 403)
    listed = client.get("/v1/jobs?state=waiting", headers=admin_headers).json()["items"]
    assert [j["id"] for j in listed] == [mine["id"]]
    assert client.get("/v1/jobs", headers=bob_h).json()["items"] == []
    by_category = client.get(
        f"/v1/jobs?category={mine['category_id']}", headers=admin_headers
    ).json()["items"]
    assert [j["id"] for j in by_category] == [mine["id"]]
    cancelled = client.post(f"/v1/jobs/{mine['id']}/cancel", headers=alice_h)
    assert cancelled.json()["state"] == "cancelled"
    assert_problem(client.post(f"/v1/jobs/{mine['id']}/cancel", headers=alice_h), 409)
    assert_problem(client.get("/v1/jobs/99999", headers=admin_headers), 404)
    assert_problem(client.get("/v1/jobs?state=bogus", headers=admin_headers), 422)


def test_a_rank_belongs_to_one_worker(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    assert (
        client.post("/v1/workers", json={"name": "a", "rank": 3}, headers=admin_headers).status_code
        == 201
    )
    problem = assert_problem(
        client.post("/v1/workers", json={"name": "b", "rank": 3}, headers=admin_headers), 409
    )
    assert "rank 3 belongs to worker 'a'" in problem["detail"]
    assert (
        client.post(
            "/v1/workers?replace=true", json={"name": "a", "rank": 3}, headers=admin_headers
        ).status_code
        == 200
    )
