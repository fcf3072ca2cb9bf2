"""Built-in queue attributes (queue_conf(5): qname, hostname, seq_no, the limits) survive
every administrator's change of a queue instance's values through the API, on both
databases: ``complex_values`` and ``attributes`` are separate kinds, and setting one
attribute of ``attributes`` overrides that one built-in, not all of them."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.http_api import register, submit


def _values(client: TestClient, headers: dict[str, str]) -> dict[str, object]:
    got = client.get("/v1/values/queues/default/h1", headers=headers)
    assert got.status_code == 200, got.text
    body: dict[str, object] = got.json()
    return body


def _runs(client: TestClient, headers: dict[str, str], hard: str) -> bool:
    job = submit(client, headers, hard=hard)
    client.post("/v1/schedule", headers=headers)
    state = client.get(f"/v1/jobs/{job['id']}", headers=headers).json()["state"]
    return bool(state == "running")


def test_complex_values_of_a_queue_instance_keep_its_builtins(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """queue_conf(5) complex_values beside the built-in attributes: giving a queue
    instance h_vmem keeps its qname, hostname and h_rt, so -l q= and -l h_rt= still match."""
    register(client, admin_headers, "h1", slots=4)
    before = _values(client, admin_headers)["attributes"]
    put = client.put(
        "/v1/values/queues/default/h1",
        json={"complex_values": {"h_vmem": "4G"}},
        headers=admin_headers,
    )
    assert put.status_code == 200, put.text
    after = _values(client, admin_headers)
    assert after["attributes"] == before
    assert after["complex_values"] == {"h_vmem": "4G"}
    assert _runs(client, admin_headers, "q=default,h_rt=1:0:0,h_vmem=1G")


def test_setting_one_builtin_keeps_the_others(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """queue_conf(5): each built-in queue attribute is its own setting; setting h_vmem
    through ``attributes`` overrides h_vmem and keeps qname, hostname and h_rt."""
    register(client, admin_headers, "h1", slots=4)
    before = _values(client, admin_headers)["attributes"]
    assert isinstance(before, dict) and {"qname", "hostname", "h_rt"} <= set(before)
    put = client.put(
        "/v1/values/queues/default/h1",
        json={"attributes": {"h_vmem": "4G"}},
        headers=admin_headers,
    )
    assert put.status_code == 200, put.text
    after = _values(client, admin_headers)["attributes"]
    assert after == {**before, "h_vmem": "4G"}
    assert _runs(client, admin_headers, "q=default,h_rt=1:0:0,h_vmem=1G")
    assert not _runs(client, admin_headers, "h_vmem=5G")
