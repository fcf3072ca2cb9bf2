"""The Grid Engine HTTP surface (issue 6) on both databases: the attribute table and its
rules, values per level, submission checks, bookings in pull and the scheduling run,
qstat -j explanations."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db.engine import Database
from app.db.models import ConsumableUsage, JobBooking
from tests.support.http_api import (
    LICENSE_ATTRIBUTE,
    assert_problem,
    define_license,
    register,
    submit,
)


def test_default_table_is_seeded(client: TestClient, admin_headers: dict[str, str]) -> None:
    page = client.get("/v1/attributes", headers=admin_headers).json()
    rows = page["items"]
    assert len(rows) == 51 and page["next_offset"] is None
    slots = next(r for r in rows if r["name"] == "slots")
    assert (slots["consumable"], slots["default"], slots["builtin"]) == ("YES", "1", True)


def test_attribute_rules(client: TestClient, admin_headers: dict[str, str]) -> None:
    """complex(5): a built-in keeps its type, cannot be deleted; the string family may switch;
    names and shortcuts are unique; a consumable must use <=."""
    arch = client.get("/v1/attributes/arch", headers=admin_headers).json()
    changed = client.put(
        "/v1/attributes/arch",
        json={**arch, "builtin": None} | {"type": "INT"},
        headers=admin_headers,
    )
    assert changed.status_code == 422
    body = {k: v for k, v in arch.items() if k != "builtin"}
    ok = client.put("/v1/attributes/arch", json={**body, "type": "CSTRING"}, headers=admin_headers)
    assert ok.status_code == 200, ok.text
    assert client.delete("/v1/attributes/arch", headers=admin_headers).status_code == 409
    created = client.post("/v1/attributes", json=LICENSE_ATTRIBUTE, headers=admin_headers)
    assert created.status_code == 201, created.text
    clash = client.post(
        "/v1/attributes", json={**LICENSE_ATTRIBUTE, "name": "lic9"}, headers=admin_headers
    )
    assert clash.status_code == 409
    bad = client.post(
        "/v1/attributes",
        json={**LICENSE_ATTRIBUTE, "name": "lic2", "shortcut": "l2", "relop": ">="},
        headers=admin_headers,
    )
    assert_problem(bad, 422)
    assert client.delete("/v1/attributes/lic", headers=admin_headers).status_code == 204


def test_submission_rejects_unknown_and_non_requestable(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    register(client, admin_headers, "h1")
    unknown = client.post("/v1/jobs", json={"hard": "no_such=1"}, headers=admin_headers)
    assert_problem(unknown, 422)
    assert "unknown resource" in unknown.json()["detail"]
    locked = client.post("/v1/jobs", json={"hard": "load_avg=1"}, headers=admin_headers)
    assert_problem(locked, 422)
    assert "non requestable" in locked.json()["detail"]


def test_pull_books_and_finish_releases(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """complex(5) consumables: a per-slot consumable books request x slots on every level with a
    capacity, in the pull's transaction; the job's end gives it back; never negative."""
    define_license(client, admin_headers)
    worker = register(client, admin_headers, "h1", slots=4)
    put = client.put(
        "/v1/values/global", json={"complex_values": {"lic": "3"}}, headers=admin_headers
    )
    assert put.status_code == 200, put.text
    client.put("/v1/values/hosts/h1", json={"complex_values": {"lic": "2"}}, headers=admin_headers)
    first = submit(client, admin_headers, hard="lic=2")
    second = submit(client, admin_headers, hard="lic=1")
    pulled = client.post("/v1/workers/h1/pull", headers=worker)
    assert pulled.status_code == 200 and pulled.json()["id"] == first["id"]
    with database.transaction() as session:
        used = sorted(session.scalars(select(ConsumableUsage.used)))
        assert used == [2.0, 2.0]
    # The host has 0 left: the second job waits although the global pool has 1.
    assert client.post("/v1/workers/h1/pull", headers=worker).status_code == 204
    explain = client.get(f"/v1/jobs/{second['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        '(-l lic=1) cannot run at host "h1" because it offers only hc:lic=0'
    ]
    done = client.post(
        f"/v1/jobs/{first['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert done.status_code == 200, done.text
    with database.transaction() as session:
        assert sorted(session.scalars(select(ConsumableUsage.used))) == [0.0, 0.0]
        assert session.scalars(select(JobBooking)).all() == []
    again = client.post("/v1/workers/h1/pull", headers=worker)
    assert again.status_code == 200 and again.json()["id"] == second["id"]


def test_schedule_dispatches_in_priority_order_with_bookings(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    define_license(client, admin_headers)
    register(client, admin_headers, "h1", slots=4)
    client.put("/v1/values/global", json={"complex_values": {"lic": "1"}}, headers=admin_headers)
    low = submit(client, admin_headers, hard="lic=1")
    high = submit(client, admin_headers, hard="lic=1", priority=10)
    run = client.post("/v1/schedule", headers=admin_headers)
    assert run.status_code == 200, run.text
    assert run.json()["dispatched"] == 1
    assert client.get(f"/v1/jobs/{high['id']}", headers=admin_headers).json()["state"] == "running"
    assert client.get(f"/v1/jobs/{low['id']}", headers=admin_headers).json()["state"] == "waiting"


def test_parallel_job_through_the_api(client: TestClient, admin_headers: dict[str, str]) -> None:
    register(client, admin_headers, "h1", slots=2)
    register(client, admin_headers, "h2", slots=2)
    pe = client.put("/v1/pes/mpi", json={"allocation_rule": "$round_robin"}, headers=admin_headers)
    assert pe.status_code == 200, pe.text
    job = submit(client, admin_headers, pe="mpi", pe_slots="2-3")
    assert client.post("/v1/schedule", headers=admin_headers).json()["dispatched"] == 1
    running = client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()
    assert (running["state"], running["slots"]) == ("running", 3)
    bad_rule = client.put("/v1/pes/x", json={"allocation_rule": "$any"}, headers=admin_headers)
    assert_problem(bad_rule, 422)
    # Digits that str.isdigit passes and int() refuses, and a number past int()'s digit
    # limit: a 422 each (the API fuzzer found a 500 for '²').
    for rule in ("²", "1²", "٣", "9" * 5000, "0"):
        refused = client.put("/v1/pes/x", json={"allocation_rule": rule}, headers=admin_headers)
        assert_problem(refused, 422)
    listed = client.get("/v1/pes", headers=admin_headers).json()["items"]
    assert "x" not in {pe["name"] for pe in listed}
    fixed = client.put("/v1/pes/x", json={"allocation_rule": "4"}, headers=admin_headers)
    assert fixed.status_code == 200 and fixed.json()["allocation_rule"] == "4"
    missing = client.post("/v1/jobs", json={"pe": "nope"}, headers=admin_headers)
    assert_problem(missing, 422)


def test_values_are_checked(client: TestClient, admin_headers: dict[str, str]) -> None:
    register(client, admin_headers, "h1")
    bad = client.put(
        "/v1/values/hosts/h1", json={"complex_values": {"h_vmem": "2X"}}, headers=admin_headers
    )
    assert_problem(bad, 422)
    queue_load = client.put(
        "/v1/values/queues/default/h1", json={"load_values": {"arch": "x"}}, headers=admin_headers
    )
    assert_problem(queue_load, 422)
    unknown_host = client.put("/v1/values/hosts/zz", json={}, headers=admin_headers)
    assert unknown_host.status_code == 404
