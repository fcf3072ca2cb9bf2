"""Per-job (JOB) consumables of parallel jobs over HTTP (complex(5), Grid Engine 6.2u2+:
checked and booked once, on the master queue; a queue that cannot supply one may take
slave tasks but cannot be master)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.http_api import register, submit

LIC_JOB = {
    "name": "lic_job",
    "shortcut": "lj",
    "type": "INT",
    "relop": "<=",
    "requestable": "YES",
    "consumable": "JOB",
    "default": "0",
}


def test_a_parallel_job_waits_without_a_master_and_explain_says_why(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    assert client.post("/v1/attributes", json=LIC_JOB, headers=admin_headers).status_code == 201
    register(client, admin_headers, "h1", slots=2)
    register(client, admin_headers, "h2", slots=2)
    for host, amount in (("h1", "0"), ("h2", "0")):
        put = client.put(
            f"/v1/values/hosts/{host}",
            json={"complex_values": {"lic_job": amount}},
            headers=admin_headers,
        )
        assert put.status_code == 200, put.text
    pe = client.put("/v1/pes/mpi", json={"allocation_rule": "$fill_up"}, headers=admin_headers)
    assert pe.status_code == 200, pe.text
    job = submit(client, admin_headers, hard="lic_job=1", pe="mpi", pe_slots="3")
    # Both hosts may take slave tasks, so the job is not refused at submission; with no
    # host able to be master it waits.
    assert job["state"] == "waiting"
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 0
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        f'queue instance "default@{host}" can only take slave tasks: (-l lic_job=1) cannot run'
        f' at host "{host}" because it offers only hc:lic_job=0'
        for host in ("h1", "h2")
    ]
    # A master-capable host appears: the job runs on both hosts, master on h2.
    put = client.put(
        "/v1/values/hosts/h2", json={"complex_values": {"lic_job": "1"}}, headers=admin_headers
    )
    assert put.status_code == 200, put.text
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    running = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    assert (running["state"], running["slots"]) == ("running", 3)
