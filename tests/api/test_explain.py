"""explain that never contradicts itself (issue 21): per worker ``eligible`` (static fit),
``can_run_now`` (what its next pull would do) and the first failing clause's code; for a
waiting job a summary in the style of HTCondor's ``condor_q -better-analyze`` (how many
workers fail on each clause, how many fit but are busy, the one change that would let the
job run soonest). And error texts without internals."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support.http_api import assert_problem, register, submit


def _explain(client: TestClient, admin: dict[str, str], job_id: int) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}/explain", headers=admin)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    for worker in body["workers"]:
        # Never eligible next to a misfit code; the first clause is the reason.
        assert worker["eligible"] == (worker["misfit_reason"] is None), worker
        if worker["clauses"]:
            assert worker["reason"] == worker["clauses"][0]["reason"], worker
        else:
            assert worker["reason"] is None and worker["can_run_now"] in (True, None), worker
        if not worker["eligible"]:
            assert worker["reason"] == worker["misfit_reason"], worker
    return body


def test_a_grid_engine_misfit_is_not_eligible(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    """The issue's contradiction: "eligible": true next to "misfit_reason": "sge-host"."""
    register(client, admin_headers, "w1")
    register(client, admin_headers, "w2")
    job = submit(client, admin_headers, hard="hostname=w2")
    workers = {w["worker"]: w for w in _explain(client, admin_headers, job["id"])["workers"]}
    assert workers["w1"]["eligible"] is False
    assert workers["w1"]["misfit_reason"] is not None
    assert workers["w1"]["misfit_reason"].startswith("sge-")
    assert workers["w1"]["can_run_now"] is False
    assert workers["w2"]["eligible"] is True and workers["w2"]["can_run_now"] is True


def test_a_busy_worker_says_why_it_did_not_take_the_job(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    worker = register(client, admin_headers, "w1", "language: ?java")
    register(client, admin_headers, "w2", "language: ?python")
    running = submit(client, admin_headers, "language: java")
    assert client.post("/v1/workers/w1/pull", headers=worker).json()["id"] == running["id"]
    waiting = submit(client, admin_headers, "language: java")

    body = _explain(client, admin_headers, waiting["id"])
    workers = {w["worker"]: w for w in body["workers"]}
    assert workers["w1"]["eligible"] is True and workers["w1"]["can_run_now"] is False
    assert workers["w1"]["reason"] == "no-free-slots"
    assert "(1 running job)" in workers["w1"]["clauses"][0]["message"]
    assert "needs 1 slot on one queue instance" in workers["w1"]["clauses"][0]["message"]
    assert workers["w2"]["reason"] == workers["w2"]["misfit_reason"] == "job-requires-tag"
    assert body["summary"] == {
        "workers": 2,
        "eligible": 1,
        "can_run_now": 0,
        "fit_but_busy": 1,
        "first_failures": {"job-requires-tag": 1, "no-free-slots": 1},
        "suggestion": "wait for the running job of worker w1 to end",
        # Every worker accounted for (issue 35): w1 not now, w2 never.
        "outranked": 0,
        "not_now": 1,
        "never": 1,
    }
    # explain of the running job: static fit only, no summary.
    ran = _explain(client, admin_headers, running["id"])
    assert ran["summary"] is None
    assert {w["worker"]: w["can_run_now"] for w in ran["workers"]} == {"w1": None, "w2": None}


def test_the_suggestion_resumes_a_drained_worker(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    register(client, admin_headers, "w1", "language: ?java")
    job = submit(client, admin_headers, "language: java")
    client.patch(
        "/v1/workers/w1", json={"state": "draining", "reason": "disk swap"}, headers=admin_headers
    )
    body = _explain(client, admin_headers, job["id"])
    (worker,) = body["workers"]
    assert (worker["eligible"], worker["can_run_now"], worker["reason"]) == (
        True,
        False,
        "worker-draining",
    )
    assert "disk swap" in worker["clauses"][0]["message"]
    assert body["summary"]["suggestion"] == "resume worker w1 (it is draining)"

    client.patch("/v1/workers/w1", json={"state": "active"}, headers=admin_headers)
    body = _explain(client, admin_headers, job["id"])
    assert body["workers"][0]["can_run_now"] is True
    assert body["summary"]["can_run_now"] == 1 and body["summary"]["suggestion"] is None


def test_the_suggestion_names_the_clause_when_nothing_fits(
    client: TestClient,
    admin_headers,  # type: ignore[no-untyped-def]
) -> None:
    register(client, admin_headers, "w1", "language: ?java")
    job = submit(client, admin_headers, "language: java", slots=2)  # w1 has 1 slot
    assert job["state"] == "failed"
    body = _explain(client, admin_headers, job["id"])
    assert body["summary"] is None
    assert body["workers"][0]["reason"] == "too-few-slots"
    register(client, admin_headers, "w2", "language: ?java", slots=1)
    hard = submit(client, admin_headers, "language: java", hard="hostname=w3")
    summary = _explain(client, admin_headers, hard["id"])["summary"]
    assert summary["eligible"] == 0
    assert summary["suggestion"].startswith("on worker w1: ")


def test_error_texts_name_no_internals(client: TestClient, admin_headers) -> None:  # type: ignore[no-untyped-def]
    bad_name = client.post("/v1/workers", json={"name": "a b"}, headers=admin_headers)
    message = assert_problem(bad_name, 422)["errors"][0]["message"]
    assert "[" not in message and "^" not in message and "should be a name of" in message
    assert "pattern" not in assert_problem(bad_name, 422)["detail"]
    bad_role = client.post(
        "/v1/tokens", json={"role": "admin", "subject": "x"}, headers=admin_headers
    )
    message = assert_problem(bad_role, 422)["errors"][0]["message"]
    assert "<Role." not in message and "'worker'" in message and "'submitter'" in message
    bad_key = client.post(
        "/v1/jobs", json={}, headers={**admin_headers, "Idempotency-Key": "x" * 300}
    )
    assert assert_problem(bad_key, 422)["errors"][0]["field"] == "header.Idempotency-Key"
    bad_path = client.get("/v1/workers/a%20b", headers=admin_headers)
    assert "^" not in assert_problem(bad_path, 422)["detail"]
