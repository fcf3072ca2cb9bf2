"""Resource quota sets over HTTP on both databases (issue 24): qconf -arqs/-srqs/-mrqs/-drqs
as routes, 422 problems with positions, and the books a pull, a scheduling run, a finish, a
return and a lease expiry keep (sge_resource_quota(5))."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import QuotaBooking, QuotaUsage, Worker
from app.matching.gridengine.quotas import quota_violations
from app.matching.invariants import violations
from app.matching.leases import expire_leases
from tests.support.http_api import assert_problem, register, submit

PER_USER = """{
   name         per_user
   description  "each user one slot"
   enabled      TRUE
   limit        users {*} to slots=1
}
"""

# A Grid Engine job: a hard request every queue instance meets (built-in h_rt is INFINITY).
GE_JOB = {"hard": "h_rt=60"}


def _used(database: Database) -> list[tuple[str, float]]:
    with database.transaction() as session:
        return sorted(
            (key, used) for key, used in session.execute(select(QuotaUsage.key, QuotaUsage.used))
        )


def test_create_show_replace_delete(client: TestClient, admin_headers: dict[str, str]) -> None:
    """qconf -arqs, -srqs, -mrqs and -drqs (sge_resource_quota(5), qconf(1))."""
    created = client.post("/v1/quotas", json={"text": PER_USER}, headers=admin_headers)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["name"], body["enabled"], body["description"]) == (
        "per_user",
        True,
        "each user one slot",
    )
    assert body["rules"] == [
        {
            "label": "per_user/1",
            "text": "users {*} to slots=1",
            "limits": [{"attribute": "slots", "value": "1"}],
        }
    ]
    assert body["text"] == PER_USER.replace("enabled      TRUE", "enabled      TRUE")
    again = client.post("/v1/quotas", json={"text": PER_USER}, headers=admin_headers)
    assert_problem(again, 409)
    listed = client.get("/v1/quotas", headers=admin_headers).json()
    assert [s["name"] for s in listed["items"]] == ["per_user"]
    replaced = client.put(
        "/v1/quotas/per_user",
        json={"text": PER_USER.replace("slots=1", "s=2").replace("TRUE", "FALSE")},
        headers=admin_headers,
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["enabled"] is False
    assert replaced.json()["rules"][0]["text"] == "users {*} to slots=2"
    renamed = client.put(
        "/v1/quotas/per_user",
        json={"text": PER_USER.replace("per_user", "other")},
        headers=admin_headers,
    )
    assert_problem(renamed, 422)
    assert client.delete("/v1/quotas/per_user", headers=admin_headers).status_code == 204
    assert_problem(client.get("/v1/quotas/per_user", headers=admin_headers), 404)


def test_bad_text_is_a_422_naming_notation_position_and_expectation(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    """Nothing is stored; the problem says where and what was expected."""
    text = "{\n name bad\n limit users {alice to slots=1\n}\n"
    refused = client.post("/v1/quotas", json={"text": text}, headers=admin_headers)
    (error,) = assert_problem(refused, 422)["errors"]
    assert (error["field"], error["notation"]) == ("body.text", "sge-resource-quota")
    assert error["position"] == text.index("{alice")
    assert "'}'" in error["expected"]
    not_consumable = client.post(
        "/v1/quotas",
        json={"text": "name x\nlimit to arch=lx-amd64\n"},
        headers=admin_headers,
    )
    assert "not a consumable" in assert_problem(not_consumable, 422)["detail"]
    assert client.get("/v1/quotas", headers=admin_headers).json()["items"] == []


def test_pull_holds_each_user_to_the_limit_and_finish_gives_it_back(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """users {*} to slots=1: the owner's second job waits, with qstat -j's line, until the
    first ends; the books follow (sge_resource_quota(5); msg_schedd.h)."""
    assert (
        client.post("/v1/quotas", json={"text": PER_USER}, headers=admin_headers).status_code == 201
    )
    worker = register(client, admin_headers, "h1", slots=4)
    first = submit(client, admin_headers, **GE_JOB)
    second = submit(client, admin_headers, **GE_JOB)
    pulled = client.post("/v1/workers/h1/pull/", headers=worker)
    assert pulled.status_code == 200 and pulled.json()["id"] == first["id"]
    assert _used(database) == [("admin/////", 1.0)]
    assert client.post("/v1/workers/h1/pull/", headers=worker).status_code == 204
    explain = client.get(f"/v1/jobs/{second['id']}/explain", headers=admin_headers).json()
    assert explain["scheduling_info"] == [
        'cannot run because it exceeds limit "admin/////" in rule "per_user/1"'
    ]
    shown = client.get("/v1/quotas/per_user", headers=admin_headers).json()
    assert shown["usage"] == [
        {"rule": "per_user/1", "key": "admin/////", "attribute": "slots", "used": 1.0, "limit": "1"}
    ]
    done = client.post(
        f"/v1/jobs/{first['id']}/finish", json={"outcome": "finished"}, headers=worker
    )
    assert done.status_code == 200, done.text
    assert _used(database) == [("admin/////", 0.0)]
    again = client.post("/v1/workers/h1/pull/", headers=worker)
    assert again.status_code == 200 and again.json()["id"] == second["id"]
    # Returning the job (a requeue) gives its slot back too.
    returned = client.post(f"/v1/jobs/{second['id']}/return", json={}, headers=worker)
    assert returned.status_code == 200, returned.text
    assert _used(database) == [("admin/////", 0.0)]
    with database.transaction() as session:
        assert session.scalars(select(QuotaBooking)).all() == []
        assert violations(session) == []


def test_lease_expiry_and_a_new_set_count_running_jobs(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """A set created while jobs run counts them at once (past its limit: Grid Engine never
    preempts for a quota); an expired lease gives the job's amounts back."""
    worker = register(client, admin_headers, "h1", slots=4)
    jobs = [submit(client, admin_headers, **GE_JOB) for _ in range(3)]
    for _ in range(2):
        assert client.post("/v1/workers/h1/pull/", headers=worker).status_code == 200
    assert (
        client.post("/v1/quotas", json={"text": PER_USER}, headers=admin_headers).status_code == 201
    )
    assert _used(database) == [("admin/////", 2.0)]
    assert client.post("/v1/workers/h1/pull/", headers=worker).status_code == 204
    with database.transaction() as session:
        session.execute(update(Worker).values(last_seen=utcnow() - timedelta(hours=1)))
    with database.transaction() as session:
        expire_leases(session, lease=timedelta(seconds=60), max_attempts=5)
    assert _used(database) == [("admin/////", 0.0)]
    states = {
        client.get(f"/v1/jobs/{j['id']}", headers=admin_headers).json()["state"] for j in jobs
    }
    assert states == {"waiting"}


def test_scheduling_run_books_quotas_and_other_users_go_on(
    client: TestClient, admin_headers: dict[str, str], database: Database
) -> None:
    """POST /v1/schedule: the owner's extra job of a category waits, another owner's job of
    the same category runs (sge_sched_job_category.c: the owner joins the category when quotas
    name users)."""
    submitter = client.post(
        "/v1/tokens", json={"role": "submitter", "subject": "bob"}, headers=admin_headers
    )
    assert submitter.status_code == 201, submitter.text
    bob = {"Authorization": f"Bearer {submitter.json()['token']}"}
    assert (
        client.post("/v1/quotas", json={"text": PER_USER}, headers=admin_headers).status_code == 201
    )
    register(client, admin_headers, "h1", slots=4)
    mine = [submit(client, admin_headers, **GE_JOB) for _ in range(2)]
    theirs = client.post("/v1/jobs", json={"resources": "", **GE_JOB}, headers=bob)
    assert theirs.status_code == 201, theirs.text
    run = client.post("/v1/schedule", headers=admin_headers)
    assert run.status_code == 200 and run.json()["dispatched"] == 2, run.text
    state = {
        job["id"]: client.get(f"/v1/jobs/{job['id']}", headers=admin_headers).json()["state"]
        for job in [*mine, theirs.json()]
    }
    assert list(state.values()) == ["running", "waiting", "running"]
    assert _used(database) == [("admin/////", 1.0), ("bob/////", 1.0)]
    with database.transaction() as session:
        assert violations(session) == []
        # A book that disagrees with what jobs hold is reported (jobmatch db check).
        session.execute(update(QuotaUsage).values(used=QuotaUsage.used + 1))
        assert len(quota_violations(session)) == 2
        session.rollback()
