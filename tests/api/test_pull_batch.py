"""The batch pull (issue 38): ``POST /v1/workers/{name}/pull-batch?max=N`` carries the
ends of the worker's jobs and pulls up to N jobs, in one transaction, with the single
finish's and the single pull's rules: a resend is answered as the first, a late report is
recorded and said back, any other refusal of a report refuses the whole request."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.matching.dispatch.batch import MAX_BATCH
from tests.support.http_api import assert_problem, register, submit
from tests.support.table_digest import empty_tables

pytestmark = pytest.mark.db


def batch(
    client: TestClient,
    name: str,
    headers: dict[str, str],
    finished: list[dict[str, Any]] | None = None,
    **params: Any,
) -> dict[str, Any]:
    response = client.post(
        f"/v1/workers/{name}/pull-batch",
        params=params,
        json={"finished": finished or []},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def job_of(client: TestClient, admin: dict[str, str], job_id: int) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}", headers=admin)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def kinds(client: TestClient, admin: dict[str, str], job_id: int) -> list[str]:
    response = client.get(f"/v1/jobs/{job_id}/history", headers=admin)
    assert response.status_code == 200, response.text
    return [event["kind"] for event in response.json()["events"]]


def test_a_batch_takes_up_to_max_jobs_best_first_as_single_pulls_would(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", slots=3)
    low = submit(client, admin_headers, priority=0)
    high = submit(client, admin_headers, priority=5)
    older = submit(client, admin_headers, priority=1)
    newer = submit(client, admin_headers, priority=1)
    answer = batch(client, "w1", worker, max=3)
    assert [job["id"] for job in answer["jobs"]] == [high["id"], older["id"], newer["id"]]
    assert all(job["state"] == "running" and job["worker"] == "w1" for job in answer["jobs"])
    assert answer["finished"] == [] and answer["placed"] == []
    # The worker's three slots are taken: the fourth job waits for a free one.
    assert batch(client, "w1", worker, max=3)["jobs"] == []
    assert job_of(client, admin_headers, low["id"])["state"] == "waiting"


def test_a_batch_asking_for_more_than_the_free_slots_gets_what_fits(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", slots=2)
    for _ in range(4):
        submit(client, admin_headers)
    assert len(batch(client, "w1", worker, max=10)["jobs"]) == 2


def test_a_pull_carrying_the_finish_ends_the_job_and_starts_the_next(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1", slots=1)
    first, second = submit(client, admin_headers), submit(client, admin_headers)
    (taken,) = batch(client, "w1", worker)["jobs"]
    assert taken["id"] == first["id"]
    report = {"job_id": first["id"], "outcome": "finished", "exit_code": 0, "output": "ok\n"}
    answer = batch(client, "w1", worker, [report])
    assert answer["finished"] == [
        {"job_id": first["id"], "state": "finished", "late": False, "detail": None, "now_on": None}
    ]
    assert [job["id"] for job in answer["jobs"]] == [second["id"]]
    ended = job_of(client, admin_headers, first["id"])
    assert (ended["state"], ended["exit_code"], ended["output"]) == ("finished", 0, "ok\n")
    assert kinds(client, admin_headers, first["id"]) == ["submitted", "dispatched", "finished"]
    # The same report again (its answer was lost) is answered as the first, and
    # changes nothing.
    again = batch(client, "w1", worker, [report])
    assert again["finished"][0]["state"] == "finished" and again["jobs"] == []
    assert kinds(client, admin_headers, first["id"]) == ["submitted", "dispatched", "finished"]


def test_a_failed_report_keeps_its_reason(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)
    batch(client, "w1", worker)
    report = {"job_id": job["id"], "outcome": "failed", "reason": "disk full", "exit_code": 3}
    assert batch(client, "w1", worker, [report])["finished"][0]["state"] == "failed"
    ended = job_of(client, admin_headers, job["id"])
    assert (ended["failure_reason"], ended["exit_code"]) == ("disk full", 3)


def test_a_late_report_is_recorded_and_said_back_and_the_pull_goes_on(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1")
    lost = submit(client, admin_headers)
    batch(client, "w1", worker)
    cancelled = client.post(f"/v1/jobs/{lost['id']}/cancel", headers=admin_headers)
    assert cancelled.status_code == 200, cancelled.text
    following = submit(client, admin_headers)
    answer = batch(client, "w1", worker, [{"job_id": lost["id"], "outcome": "finished"}])
    (ended,) = answer["finished"]
    assert (ended["job_id"], ended["state"], ended["late"]) == (lost["id"], "cancelled", True)
    assert ended["detail"]
    assert [job["id"] for job in answer["jobs"]] == [following["id"]]
    assert "late_report" in kinds(client, admin_headers, lost["id"])
    assert job_of(client, admin_headers, lost["id"])["state"] == "cancelled"


def test_a_report_the_finish_refuses_refuses_the_whole_batch_naming_it(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    mine_headers = register(client, admin_headers, "w1")
    other_headers = register(client, admin_headers, "w2")
    mine, theirs = submit(client, admin_headers), submit(client, admin_headers)
    batch(client, "w1", mine_headers)
    batch(client, "w2", other_headers)
    waiting = submit(client, admin_headers)
    response = client.post(
        "/v1/workers/w1/pull-batch",
        json={
            "finished": [
                {"job_id": mine["id"], "outcome": "finished"},
                {"job_id": theirs["id"], "outcome": "finished"},
            ]
        },
        headers=mine_headers,
    )
    problem = assert_problem(response, 403)
    assert problem["detail"].startswith(f"finished[1] (job {theirs['id']}): ")
    # Nothing was stored: the first report was not applied, nothing was pulled.
    assert job_of(client, admin_headers, mine["id"])["state"] == "running"
    assert job_of(client, admin_headers, waiting["id"])["state"] == "waiting"


def test_a_job_reported_twice_or_a_max_out_of_range_is_refused_before_any_work(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)
    batch(client, "w1", worker)
    twice = client.post(
        "/v1/workers/w1/pull-batch",
        json={"finished": [{"job_id": job["id"], "outcome": "finished"}] * 2},
        headers=worker,
    )
    problem = assert_problem(twice, 422)
    assert "finished[1].job_id" in str(problem)
    assert job_of(client, admin_headers, job["id"])["state"] == "running"
    for bad in (0, MAX_BATCH + 1):
        refused = client.post("/v1/workers/w1/pull-batch", params={"max": bad}, headers=worker)
        assert "max" in str(assert_problem(refused, 422))
    too_many = client.post(
        "/v1/workers/w1/pull-batch",
        json={"finished": [{"job_id": n, "outcome": "finished"} for n in range(1, MAX_BATCH + 2)]},
        headers=worker,
    )
    assert_problem(too_many, 422)
    unknown = client.post(
        "/v1/workers/w1/pull-batch",
        json={"finished": [{"job_id": job["id"], "outcome": "done"}]},
        headers=worker,
    )
    assert "outcome" in str(assert_problem(unknown, 422))


def test_another_workers_token_is_refused(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    register(client, admin_headers, "w1")
    other = register(client, admin_headers, "w2")
    assert_problem(client.post("/v1/workers/w1/pull-batch", headers=other), 403)


def test_a_body_is_optional(client: TestClient, admin_headers: dict[str, str]) -> None:
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)
    response = client.post("/v1/workers/w1/pull-batch", headers=worker)
    assert response.status_code == 200, response.text
    assert [taken["id"] for taken in response.json()["jobs"]] == [job["id"]]


def test_a_waiting_batch_applies_its_reports_first_and_wakes_on_a_submission(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    worker = register(client, admin_headers, "w1")
    job = submit(client, admin_headers)
    batch(client, "w1", worker)
    answers: list[dict[str, Any]] = []

    def wait_for_work() -> None:
        answers.append(
            batch(client, "w1", worker, [{"job_id": job["id"], "outcome": "finished"}], wait=20)
        )

    waiter = threading.Thread(target=wait_for_work)
    waiter.start()
    deadline = time.monotonic() + 10
    while job_of(client, admin_headers, job["id"])["state"] != "finished":
        assert time.monotonic() < deadline, "the carried report was not applied before the wait"
        time.sleep(0.05)
    later = submit(client, admin_headers)
    waiter.join(30)
    assert not waiter.is_alive(), "the waiting batch did not answer"
    (answer,) = answers
    assert answer["finished"][0]["state"] == "finished"
    assert [taken["id"] for taken in answer["jobs"]] == [later["id"]]


def _cluster(client: TestClient, admin: dict[str, str], seed: int) -> dict[str, str]:
    """A worker with four slots over two queues and jobs of mixed priorities, slots and
    requests (some it cannot run), the same for a seed."""
    rng = random.Random(seed)
    response = client.post(
        "/v1/workers",
        json={
            "name": "w1",
            "resources": "language: java; java: 11",
            "queues": [{"name": "all.q", "slots": 3}, {"name": "big.q", "slots": 1}],
        },
        headers=admin,
    )
    assert response.status_code == 201, response.text
    register(client, admin, "other", "language: python")
    requests = ["", "language: java", "language: python", "language: ?java; java: 11"]
    for _ in range(12):
        submit(
            client,
            admin,
            rng.choice(requests),
            priority=rng.randint(0, 3),
            slots=rng.choice([1, 1, 2]),
        )
    return {"Authorization": f"Bearer {response.json()['token']}"}


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_starts_what_as_many_single_pulls_would(
    client: TestClient, admin_headers: dict[str, str], database: Database, seed: int
) -> None:
    """The batch and the single pulls on the same cluster, built twice: the same jobs
    start, in the same order, on the same queues."""
    worker = _cluster(client, admin_headers, seed)
    batched = [job["id"] for job in batch(client, "w1", worker, max=4)["jobs"]]
    queues_batched = _queues(client, admin_headers)
    empty_tables(database)
    worker = _cluster(client, admin_headers, seed)
    single: list[int] = []
    for _ in range(4):
        pulled = client.post("/v1/workers/w1/pull", headers=worker)
        if pulled.status_code == 204:
            break
        single.append(pulled.json()["id"])
    assert len(batched) >= 2, "the cluster should give the batch several jobs"
    assert _offsets(batched) == _offsets(single)
    assert queues_batched == _queues(client, admin_headers)


def _offsets(ids: list[int]) -> list[int]:
    """Job ids as offsets from the first job of their build (ids differ between builds)."""
    return [job_id - min(ids) for job_id in ids] if ids else []


def _queues(client: TestClient, admin: dict[str, str]) -> list[tuple[str, int]]:
    response = client.get("/v1/workers/w1", headers=admin)
    assert response.status_code == 200, response.text
    return [(queue["queue"], queue["used_slots"]) for queue in response.json()["queues"]]
