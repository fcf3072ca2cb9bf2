"""Queue ``load_thresholds`` over HTTP, on both databases: set with
``PUT /v1/queues/{name}``, compared with the load values workers report
(``PUT /v1/workers/{name}/load``), a pull and a scheduling run leave an instance in alarm
alone, and explain says so in qstat -j's words.

Sources: queue_conf(5) of Grid Engine 6.2u5 (load_thresholds), and
source/libs/sched/sge_select_queue.c at V62u5_TAG: load_check_alarm() (alarm when
``load RELOP threshold``), MSG_SCHEDD_INFO_QUEUEOVERLOADED_SS ("queue instance "%s"
dropped because it is overloaded: %s") with MSG_SCHEDD_WHYEXCEEDFLOATVALUE_SFSSS
(``name=%f (no load adjustment) relop threshold``)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.http_api import assert_problem, submit


def _worker(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    body = {"name": name, "queues": [{"name": "all.q", "slots": 2}]}
    response = client.post("/v1/workers", json=body, headers=admin)
    assert response.status_code in (200, 201), response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _load(client: TestClient, worker: dict[str, str], name: str, **values: str) -> None:
    response = client.put(f"/v1/workers/{name}/load", json={"load_values": values}, headers=worker)
    assert response.status_code == 200, response.text


def test_thresholds_are_checked_stored_and_read_back(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    assert_problem(
        client.put("/v1/queues/all.q", json={"load_thresholds": "x"}, headers=admin_headers),
        404,
    )
    _worker(client, admin_headers, "h1")
    bad = client.put(
        "/v1/queues/all.q",
        json={"load_thresholds": "np_load_avg=1.75,arch=lx"},
        headers=admin_headers,
    )
    (error,) = assert_problem(bad, 422)["errors"]
    assert (error["field"], error["notation"], error["position"]) == (
        "body.load_thresholds",
        "queue_conf load_thresholds",
        17,
    )
    assert client.get("/v1/queues/all.q", headers=admin_headers).json()["load_thresholds"] == (
        "NONE"
    )
    put = client.put(
        "/v1/queues/all.q", json={"load_thresholds": "nla=1.75"}, headers=admin_headers
    )
    assert put.status_code == 200, put.text
    assert put.json() == {"name": "all.q", "seq_no": 0, "load_thresholds": "np_load_avg=1.75"}


def test_an_overloaded_host_gets_no_job_until_its_load_falls(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    h1 = _worker(client, admin_headers, "h1")
    put = client.put(
        "/v1/queues/all.q", json={"load_thresholds": "np_load_avg=1.0"}, headers=admin_headers
    )
    assert put.status_code == 200, put.text
    # load_avg 3 on 2 processors: np_load_avg 1.5, computed as Grid Engine's execd does.
    _load(client, h1, "h1", load_avg="3.0", num_proc="2")
    job = submit(client, admin_headers)
    assert job["state"] == "waiting"
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 204
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 0
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        'queue instance "all.q@h1" dropped because it is overloaded: np_load_avg=1.500000 '
        "(= load_avg 3.000000 / 2 processors) >= 1.0"
    ]
    _load(client, h1, "h1", load_avg="1.0", num_proc="2")
    pulled = client.post("/v1/workers/h1/pull", headers=h1)
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]
