"""Grid Engine ``-q``, ``-masterq`` and ``-soft -q`` over HTTP, on both databases.

Sources: qsub(1) of Grid Engine 6.2u5 (``-q wc_queue_list``, ``-masterq wc_queue_list``
"only meaningful together with the -pe option"), sge_types(1) (wc_queue_list), and
source/libs/sched/sge_select_queue.c at V62u5_TAG: sge_queue_match_static() refuses an
instance outside ``-q`` with MSG_SCHEDD_INFO_NOTINHARDQUEUELST_S ("cannot run in queue
"%s" because it is not contained in its hard queue list (-q)", msg_schedd.h) unless
``-masterq`` names it; compute_soft_violations() counts each soft ``-q`` item that rejects
the instance.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.http_api import assert_problem, submit


def _worker(client: TestClient, admin: dict[str, str], name: str, *queues: str) -> dict[str, str]:
    body = {"name": name, "queues": [{"name": queue, "slots": 2} for queue in queues]}
    response = client.post("/v1/workers", json=body, headers=admin)
    assert response.status_code in (200, 201), response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def test_a_malformed_list_is_a_422_naming_the_option_and_the_position(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    response = client.post("/v1/jobs", json={"queue_list": "all.q,,b.q"}, headers=admin_headers)
    body = assert_problem(response, 422)
    (error,) = body["errors"]
    assert (error["field"], error["notation"], error["position"]) == (
        "body.queue_list",
        "qsub -q",
        6,
    )
    assert error["expected"] == "a queue, queue@host or a wildcard pattern"
    soft = client.post("/v1/jobs", json={"soft_queue_list": "@grp"}, headers=admin_headers)
    assert assert_problem(soft, 422)["errors"][0]["notation"] == "qsub -soft -q"
    # -masterq names a parallel job's master queue: without -pe it is refused.
    master = client.post("/v1/jobs", json={"master_queue_list": "a.q"}, headers=admin_headers)
    assert assert_problem(master, 422)["errors"][0]["field"] == "body.master_queue_list"
    assert client.get("/v1/jobs", headers=admin_headers).json()["items"] == []


def test_hard_q_keeps_the_job_off_other_instances_in_sql_pull_and_explain(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    h1 = _worker(client, admin_headers, "h1", "all.q")
    h2 = _worker(client, admin_headers, "h2", "all.q", "gpu.q")
    job = submit(client, admin_headers, queue_list="gpu.q@H*")
    assert (job["state"], job["queue_list"]) == ("waiting", "gpu.q@H*")
    # The misfit cache (SQL) rules out h1, which has no gpu.q instance.
    candidates = client.get(f"/v1/jobs/{job['id']}/candidates", headers=admin_headers).json()
    assert [c["worker"] for c in candidates["items"]] == ["h2"]
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        f'cannot run in queue "all.q@{host}" because it is not contained in its hard '
        "queue list (-q)"
        for host in ("h1", "h2")
    ]
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 204
    pulled = client.post("/v1/workers/h2/pull", headers=h2)
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]
    # The pull booked the gpu.q instance, the one -q names.
    queues = client.get("/v1/workers/h2", headers=admin_headers).json()["queues"]
    assert {q["queue"]: q["used_slots"] for q in queues} == {"all.q": 0, "gpu.q": 1}


def test_a_job_whose_list_names_no_instance_is_refused_in_grid_engine_words(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """qsub checks every -q, -soft -q and -masterq item against the existing queue
    instances whatever -w says (qref_list_is_valid() in source/libs/sgeobj/sge_qref.c,
    called by source/daemons/qmaster/sge_job_verify.c; MSG_QREF_QUNKNOWN_S)."""
    _worker(client, admin_headers, "h1", "all.q")
    response = client.post("/v1/jobs", json={"queue_list": "nosuch.q"}, headers=admin_headers)
    (error,) = assert_problem(response, 422)["errors"]
    assert error["field"] == "body.queue_list"
    assert error["message"] == 'Job was rejected because job requests unknown queue "nosuch.q"'
    soft = client.post(
        "/v1/jobs", json={"soft_queue_list": "all.q,gpu.q@h1"}, headers=admin_headers
    )
    assert assert_problem(soft, 422)["errors"][0]["field"] == "body.soft_queue_list"
    assert client.get("/v1/jobs", headers=admin_headers).json()["items"] == []
    # A list that names an existing instance, even one that cannot run the job now, is
    # accepted and waits.
    job = submit(client, admin_headers, queue_list="all.q@h1", hard="h_rt=60")
    assert job["state"] == "waiting"


def test_soft_q_prefers_the_named_instance(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    _worker(client, admin_headers, "h1", "all.q", "fast.q")
    job = submit(client, admin_headers, soft_queue_list="fast.q")
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    queues = client.get("/v1/workers/h1", headers=admin_headers).json()["queues"]
    assert {q["queue"]: q["used_slots"] for q in queues} == {"all.q": 0, "fast.q": 1}
    assert client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["state"] == ("running")


def test_masterq_chooses_the_master_and_explain_says_which_cannot_be(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    _worker(client, admin_headers, "h1", "all.q")
    _worker(client, admin_headers, "h2", "all.q")
    pe = client.put("/v1/pes/mpi", json={"allocation_rule": "$fill_up"}, headers=admin_headers)
    assert pe.status_code == 200, pe.text
    job = submit(client, admin_headers, pe="mpi", pe_slots="4", master_queue_list="all.q@h2")
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        'queue instance "all.q@h1" cannot be master: it is not contained in the master '
        "hard queue list (-masterq)"
    ]
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    running = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    # The master runs the job, so the job is reported on the master's worker.
    assert (running["state"], running["slots"], running["worker"]) == ("running", 4, "h2")
    assert running["master_queue_list"] == "all.q@h2"
