"""Issue 35 through the HTTP API, in the README's cluster: two workers with inventories
(``node/[core=8]``) and workers without one. A job on more nodes than exist is shown as
runnable nowhere and busy nowhere (reason ``needs-several-nodes``); a GPU job never lands
on a worker that declares no GPU; a job that could run but waits behind another says so
(``outranked``); the summary's answers add up to the workers."""

from __future__ import annotations

from fastapi.testclient import TestClient


def _register(
    client: TestClient, headers: dict[str, str], body: dict[str, object]
) -> dict[str, str]:
    answer = client.post("/v1/workers", json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def _cluster(client: TestClient, headers: dict[str, str]) -> dict[str, dict[str, str]]:
    return {
        "i0": _register(client, headers, {"name": "i0", "slots": 8, "inventory": "node/[core=8]"}),
        "i1": _register(client, headers, {"name": "i1", "slots": 8, "inventory": "node/[core=8]"}),
        "w1": _register(client, headers, {"name": "w1", "slots": 2}),
        "w8": _register(client, headers, {"name": "w8", "slots": 8}),
    }


def _accounted(summary: dict[str, int]) -> None:
    parts = summary["can_run_now"] + summary["outranked"] + summary["not_now"] + summary["never"]
    assert parts == summary["workers"], summary


def test_a_three_node_job_in_a_two_node_cluster_runs_nowhere_and_nobody_is_busy(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """README's node=3/slot/core=8 job (issue 35): it waits, no worker has can_run_now,
    none is called busy, every one says needs-several-nodes; candidates are none and the
    category fits no worker."""
    _cluster(client, admin_headers)
    job = client.post("/v1/jobs", json={"shape": "node=3/slot/core=8"}, headers=admin_headers)
    assert job.status_code == 201 and job.json()["state"] == "waiting"
    job_id = job.json()["id"]
    body = client.get(f"/v1/jobs/{job_id}/explain", headers=admin_headers).json()
    for worker in body["workers"]:
        assert worker["can_run_now"] is False, worker
        assert worker["eligible"] is False, worker
        assert worker["reason"] == "needs-several-nodes", worker
        assert worker["answer"] == "never", worker
        assert "busy" not in worker["reason"]
    summary = body["summary"]
    assert summary["can_run_now"] == 0 and summary["fit_but_busy"] == 0
    assert summary["never"] == 4 and summary["first_failures"] == {"needs-several-nodes": 4}
    assert summary["suggestion"].startswith("register 1 more worker with an inventory")
    _accounted(summary)
    assert body["allocation"]["placeable"] is False
    candidates = client.get(f"/v1/jobs/{job_id}/candidates", headers=admin_headers).json()
    assert candidates["items"] == []
    category = client.get(
        f"/v1/categories/{job.json()['category_id']}", headers=admin_headers
    ).json()
    assert category["fitting_workers"] == 0
    # An allocation agrees: it cannot place the job.
    assert client.post(f"/v1/jobs/{job_id}/allocate", headers=admin_headers).status_code == 409


def test_a_two_node_job_can_run_now_exactly_where_an_allocation_places_it(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """A job on two nodes in the same cluster: explain's can_run_now is the workers that
    POST /v1/jobs/{id}/allocate then uses; the workers without an inventory never take
    part (needs-several-nodes)."""
    _cluster(client, admin_headers)
    job_id = client.post(
        "/v1/jobs", json={"shape": "node=2/slot/core=8"}, headers=admin_headers
    ).json()["id"]
    body = client.get(f"/v1/jobs/{job_id}/explain", headers=admin_headers).json()
    answers = {w["worker"]: (w["can_run_now"], w["reason"]) for w in body["workers"]}
    assert answers == {
        "i0": (True, None),
        "i1": (True, None),
        "w1": (False, "needs-several-nodes"),
        "w8": (False, "needs-several-nodes"),
    }
    _accounted(body["summary"])
    started = client.post(f"/v1/jobs/{job_id}/allocate", headers=admin_headers)
    assert started.status_code == 200, started.text


def test_a_gpu_job_is_never_pulled_by_a_worker_that_declares_no_gpu(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """slot/[core=4;gpu=1] (issue 35): a worker without an inventory offers
    node/[core=<slots>] and nothing else. With no GPU anywhere the job fails at
    submission ("No suitable worker found"); with a GPU worker it waits for that one, and
    the worker without an inventory neither pulls it nor is said to be able to."""
    tokens = _cluster(client, admin_headers)
    refused = client.post("/v1/jobs", json={"shape": "slot/[core=4;gpu=1]"}, headers=admin_headers)
    assert refused.json()["state"] == "failed"
    assert refused.json()["failure_reason"] == "No suitable worker found"

    gpu = _register(
        client, admin_headers, {"name": "g0", "slots": 8, "inventory": "node/[core=8;gpu=1]"}
    )
    hog = client.post("/v1/jobs", json={"shape": "slot/[core=1;gpu=1]"}, headers=admin_headers)
    assert client.post("/v1/workers/g0/pull", headers=gpu).json()["id"] == hog.json()["id"]
    job = client.post("/v1/jobs", json={"shape": "slot/[core=4;gpu=1]"}, headers=admin_headers)
    assert job.json()["state"] == "waiting"
    job_id = job.json()["id"]
    body = client.get(f"/v1/jobs/{job_id}/explain", headers=admin_headers).json()
    workers = {w["worker"]: w for w in body["workers"]}
    assert workers["w8"]["can_run_now"] is False and workers["w8"]["answer"] == "never"
    assert workers["w8"]["reason"] == "inventory-too-small"
    assert "node/[core=8]" in workers["w8"]["clauses"][0]["message"]
    # g0 is busy: its one GPU is held, and explain names the job that holds it.
    assert workers["g0"]["answer"] == "not-now" and workers["g0"]["reason"] == "inventory-busy"
    assert str(hog.json()["id"]) in workers["g0"]["clauses"][0]["message"]
    _accounted(body["summary"])
    for name in ("w1", "w8"):
        assert client.post(f"/v1/workers/{name}/pull", headers=tokens[name]).status_code == 204
    # Plain slot jobs keep their behaviour on the workers without an inventory.
    plain = client.post("/v1/jobs", json={"resources": ""}, headers=admin_headers).json()
    assert client.post("/v1/workers/w8/pull", headers=tokens["w8"]).json()["id"] == plain["id"]


def test_a_worker_that_could_run_a_job_but_takes_another_first_is_outranked(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """The third answer (issue 35): w8 could start both jobs; its next pull takes the one
    of higher priority, so explain says outranked for the other, not can_run_now."""
    client.post("/v1/workers", json={"name": "w8", "slots": 8}, headers=admin_headers)
    low = client.post("/v1/jobs", json={"priority": 0}, headers=admin_headers).json()
    high = client.post(
        "/v1/jobs", json={"priority": 5, "resources": "x: ?a"}, headers=admin_headers
    ).json()
    body = client.get(f"/v1/jobs/{low['id']}/explain", headers=admin_headers).json()
    (w8,) = body["workers"]
    assert w8["can_run_now"] is False and w8["answer"] == "outranked"
    assert w8["reason"] == "outranked" and str(high["id"]) in w8["clauses"][0]["message"]
    assert body["summary"]["outranked"] == 1
    _accounted(body["summary"])
    top = client.get(f"/v1/jobs/{high['id']}/explain", headers=admin_headers).json()
    assert top["workers"][0]["can_run_now"] is True and top["workers"][0]["answer"] == "now"
