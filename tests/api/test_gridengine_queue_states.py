"""Queue instance states, per-host values and the queue sort over HTTP, on both databases:
``PATCH /v1/queues/{name}/instances/{host}`` disables (``qmod -d``) or suspends (``qmod
-s``) an instance and sets its own seq_no and load_thresholds; ``PUT /v1/scheduler`` sets
sched_conf(5)'s queue_sort_method and load_formula. A pull, a scheduling run, candidates
and explain answer from the same decision.

Sources: qmod(1) -d/-e/-s/-us; source/libs/sched/sge_select_queue.c sge_split_disabled()
(MSG_SCHEDD_INFO_QUEUEDISABLED_: "queue instance "%s" dropped because it is disabled");
source/daemons/qmaster/sge_sched_prepare_data.c (no suspended instance reaches the
scheduler) and scheduler_method() in sge_sched_thread.c (MSG_SCHEDD_INFO_QUEUENOTAVAIL_:
"... dropped because it is temporarily not available"); queue_conf(5) per-host values
(``seq_no 0,[h2=1]``); sched_conf(5) queue_sort_method and load_formula, sort_hosts.c
sort_host_list()."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.http_api import assert_problem, submit


def _worker(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    body = {"name": name, "queues": [{"name": "all.q", "slots": 1}]}
    response = client.post("/v1/workers", json=body, headers=admin)
    assert response.status_code in (200, 201), response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _patch(client: TestClient, admin: dict[str, str], host: str, **body: object) -> dict:  # type: ignore[type-arg]
    response = client.patch(f"/v1/queues/all.q/instances/{host}", json=body, headers=admin)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _ge_job(client: TestClient, admin: dict[str, str]) -> dict:  # type: ignore[type-arg]
    # A -q list makes the job a Grid Engine job whatever the cluster's values.
    return submit(client, admin, queue_list="all.q")


def test_a_disabled_instance_gets_no_job_and_explain_says_why(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    h1 = _worker(client, admin_headers, "h1")
    out = _patch(client, admin_headers, "h1", disabled=True)
    assert (out["name"], out["disabled"], out["suspended"]) == ("all.q@h1", True, False)
    job = _ge_job(client, admin_headers)
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 204
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 0
    candidates = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers)
    assert candidates.status_code == 200, candidates.text
    assert candidates.json()["items"] == []
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        'queue instance "all.q@h1" dropped because it is disabled'
    ]
    (worker,) = explain["workers"]
    assert (worker["misfit_reason"], worker["reason"]) == (
        "sge-queue-unavailable",
        "sge-queue-unavailable",
    )
    assert "dropped because it is disabled" in worker["clauses"][0]["message"]
    # qmod -e: the worker takes the job at its next pull.
    _patch(client, admin_headers, "h1", disabled=False)
    pulled = client.post("/v1/workers/h1/pull", headers=h1)
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]


def test_a_suspended_instance_gets_no_job_the_other_host_does(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    h1 = _worker(client, admin_headers, "h1")
    _worker(client, admin_headers, "h2")
    _patch(client, admin_headers, "h1", suspended=True)
    job = _ge_job(client, admin_headers)
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 204
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        'queue instance "all.q@h1" dropped because it is temporarily not available'
    ]
    names = [
        c["worker"]
        for c in client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()[
            "items"
        ]
    ]
    assert names == ["h2"]
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    assert client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["worker"] == "h2"


def test_per_host_values_are_set_read_and_cleared(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    assert_problem(
        client.patch(
            "/v1/queues/all.q/instances/h1", json={"disabled": True}, headers=admin_headers
        ),
        404,
    )
    _worker(client, admin_headers, "h1")
    bad = client.patch(
        "/v1/queues/all.q/instances/h1",
        json={"load_thresholds": "np_load_avg=x", "disabled": True},
        headers=admin_headers,
    )
    (error,) = assert_problem(bad, 422)["errors"]
    assert (error["field"], error["notation"]) == (
        "body.load_thresholds",
        "queue_conf load_thresholds",
    )
    read = client.get("/v1/queues/all.q/instances/h1", headers=admin_headers).json()
    assert read["disabled"] is False  # nothing was stored
    put = client.put("/v1/queues/all.q", json={"seq_no": 7}, headers=admin_headers)
    assert put.status_code == 200 and put.json()["seq_no"] == 7
    out = _patch(client, admin_headers, "h1", seq_no=2, load_thresholds="nla=1.5")
    assert (out["own_seq_no"], out["seq_no"]) == (2, 2)
    assert (out["own_load_thresholds"], out["load_thresholds"]) == (
        "np_load_avg=1.5",
        "np_load_avg=1.5",
    )
    out = _patch(client, admin_headers, "h1", seq_no=None, load_thresholds=None)
    assert (out["own_seq_no"], out["seq_no"], out["load_thresholds"]) == (None, 7, "NONE")
    assert_problem(
        client.patch("/v1/queues/all.q/instances/h1", json={"seq_no": -1}, headers=admin_headers),
        422,
    )


def test_a_per_host_load_threshold_alarms_only_its_instance(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    h1 = _worker(client, admin_headers, "h1")
    response = client.put(
        "/v1/workers/h1/load", json={"load_values": {"np_load_avg": "1.0"}}, headers=h1
    )
    assert response.status_code == 200, response.text
    assert (
        client.put(
            "/v1/queues/all.q", json={"load_thresholds": "np_load_avg=2"}, headers=admin_headers
        ).status_code
        == 200
    )
    _patch(client, admin_headers, "h1", load_thresholds="np_load_avg=0.5")
    job = _ge_job(client, admin_headers)
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 204
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        'queue instance "all.q@h1" dropped because it is overloaded: np_load_avg=1.000000 '
        "(no load adjustment) >= 0.5"
    ]
    _patch(client, admin_headers, "h1", load_thresholds=None)
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 200


def test_the_scheduler_configuration_is_checked_stored_and_sorts_by_load(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    assert client.get("/v1/scheduler", headers=admin_headers).json() == {
        "configured": False,
        "queue_sort_method": None,
        "load_formula": None,
    }
    bad = client.put(
        "/v1/scheduler",
        json={"queue_sort_method": "load", "load_formula": "np_load_avg*2*3"},
        headers=admin_headers,
    )
    (error,) = assert_problem(bad, 422)["errors"]
    assert (error["field"], error["notation"], error["position"]) == (
        "body.load_formula",
        "sched_conf load_formula",
        13,
    )
    assert_problem(
        client.put("/v1/scheduler", json={"queue_sort_method": "fifo"}, headers=admin_headers), 422
    )
    assert client.get("/v1/scheduler", headers=admin_headers).json()["configured"] is False
    for name, load in (("h1", "0.9"), ("h2", "0.1")):
        worker = _worker(client, admin_headers, name)
        response = client.put(
            f"/v1/workers/{name}/load", json={"load_values": {"np_load_avg": load}}, headers=worker
        )
        assert response.status_code == 200, response.text
    put = client.put(
        "/v1/scheduler",
        json={"queue_sort_method": "load", "load_formula": "nla"},
        headers=admin_headers,
    )
    assert put.json() == {
        "configured": True,
        "queue_sort_method": "load",
        "load_formula": "np_load_avg",
    }
    job = _ge_job(client, admin_headers)
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    assert client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["worker"] == "h2"
    # Without a configuration: seq_no, then creation (h1 first).
    reset = client.delete("/v1/scheduler", headers=admin_headers)
    assert reset.status_code == 200 and reset.json()["configured"] is False
    second = _ge_job(client, admin_headers)
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    assert client.get(f"/v1/jobs/{second['id']}", headers=admin_headers).json()["worker"] == "h1"
