"""POST /v1/jobs/bulk with an Idempotency-Key (issue 38): a bulk submission retried after
a lost answer gets the jobs the first one stored, never a second set; on both databases."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import BulkIdempotencyKey, Job
from tests.support.http_api import assert_problem, register, submitter_token

#: Two single jobs, one nothing fits (failed at submission) and an array of three tasks.
BODY: dict[str, Any] = {
    "jobs": [
        {"resources": "language: java", "priority": 2},
        {"resources": "language: cobol"},
        {"resources": "language: java", "tasks": "1-3", "task_concurrency": 2},
    ]
}


def _jobs(database: Database) -> int:
    with database.transaction(write=False) as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


def _post(client: TestClient, headers: dict[str, str], key: str, body: dict[str, Any]) -> Any:
    return client.post("/v1/jobs/bulk", json=body, headers={**headers, "Idempotency-Key": key})


def test_the_same_key_and_body_give_the_same_jobs_as_they_are_now(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java", slots=4)
    first = _post(client, admin_headers, "deadline-17", BODY)
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    stored = first.json()
    assert stored["count"] == 5
    assert [job["state"] for job in stored["jobs"]] == ["waiting", "failed"] + ["waiting"] * 3
    # The worker takes the best job: the replay shows the jobs as they are now.
    taken = client.post("/v1/workers/w1/pull", headers=worker).json()["id"]
    # The same body with its keys in another order is the same body.
    again = _post(
        client,
        admin_headers,
        "deadline-17",
        {"jobs": [dict(reversed(j.items())) for j in BODY["jobs"]]},
    )
    assert again.status_code == 201, again.text
    assert again.headers["idempotent-replayed"] == "true"
    replayed = again.json()
    assert [job["id"] for job in replayed["jobs"]] == [job["id"] for job in stored["jobs"]]
    assert replayed["count"] == 5
    now = {job["id"]: job["state"] for job in replayed["jobs"]}
    assert now[taken] == "running"
    assert [(j["array_id"], j["task_id"], j["failure_reason"]) for j in replayed["jobs"]] == [
        (j["array_id"], j["task_id"], j["failure_reason"]) for j in stored["jobs"]
    ]
    assert _jobs(database) == 5
    # The key, in SQL: its jobs as an RFC 22 idset.
    with database.transaction(write=False) as session:
        row = session.scalar(select(BulkIdempotencyKey))
        assert row is not None and row.key == "deadline-17"
        first_id, last_id = stored["jobs"][0]["id"], stored["jobs"][-1]["id"]
        assert row.job_ids == f"{first_id}-{last_id}"


def test_another_body_under_a_used_key_is_refused_and_stores_nothing(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    register(client, admin_headers, "w1", "language: ?java")
    assert _post(client, admin_headers, "k1", BODY).status_code == 201
    other = {"jobs": [{"resources": "language: java", "priority": 3}]}
    problem = assert_problem(_post(client, admin_headers, "k1", other), 422)
    assert problem["errors"][0]["field"] == "header.Idempotency-Key"
    assert "different request body" in problem["detail"]
    assert _jobs(database) == 5


def test_a_refused_body_leaves_its_key_free(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """The claim of the key is rolled back with the refused request: the key is free for
    the corrected body."""
    register(client, admin_headers, "w1", "language: ?java")
    bad = {"jobs": [{"resources": "language: java"}, {"resources": "language java"}]}
    problem = assert_problem(_post(client, admin_headers, "k2", bad), 422)
    assert problem["errors"][0]["field"].startswith("body.jobs.1.resources")
    assert _jobs(database) == 0
    with database.transaction(write=False) as session:
        assert session.scalar(select(func.count()).select_from(BulkIdempotencyKey)) == 0
    good = _post(client, admin_headers, "k2", BODY)
    assert good.status_code == 201 and "idempotent-replayed" not in good.headers
    assert _jobs(database) == 5


def test_keys_are_per_submitter_and_apart_from_single_submissions(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    register(client, admin_headers, "w1", "language: ?java")
    tokens = {name: submitter_token(client, admin_headers, name) for name in ("alice", "bob")}
    one = {"jobs": [{"resources": "language: java"}]}
    alice = _post(client, tokens["alice"], "same", one).json()["jobs"][0]["id"]
    bob = _post(client, tokens["bob"], "same", one)
    assert "idempotent-replayed" not in bob.headers
    assert bob.json()["jobs"][0]["id"] != alice
    single = client.post(
        "/v1/jobs",
        json={"resources": "language: java"},
        headers={**tokens["alice"], "Idempotency-Key": "same"},
    )
    assert single.status_code == 201 and "idempotent-replayed" not in single.headers
    assert single.json()["id"] != alice
    assert _jobs(database) == 3


def test_concurrent_first_uses_of_a_key_store_one_set(
    client: TestClient, database: Database, admin_headers: dict[str, str]
) -> None:
    """Four requests with one key at once (a client's retries racing its first attempt):
    one set of jobs stored, and every answer names it. On PostgreSQL the later claims
    wait at the key's unique constraint for the first to commit."""
    register(client, admin_headers, "w1", "language: ?java")
    answers: list[Any] = []
    start = threading.Barrier(4)

    def send() -> None:
        start.wait()
        answers.append(_post(client, admin_headers, "race", BODY))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [answer.status_code for answer in answers] == [201] * 4
    ids = {tuple(job["id"] for job in answer.json()["jobs"]) for answer in answers}
    assert len(ids) == 1
    assert sum("idempotent-replayed" in answer.headers for answer in answers) == 3
    assert _jobs(database) == 5
