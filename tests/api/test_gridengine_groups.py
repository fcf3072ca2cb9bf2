"""Host groups, user access lists and projects over HTTP on both databases (issue 36):
``qconf -ahgrp/-shgrp/-mhgrp/-dhgrp``, ``-au/-su/-mu/-dul`` and ``-aprj/-sprj/-dprj`` as
routes, 422 problems naming the notation, and what they change for jobs: ``-q
all.q@@grp`` in a pull, a scheduling run and explain; a job's ``project`` (qsub -P, which
must exist: MSG_JOB_PRJUNKNOWN_S of job_verify_project()); ``verify: e`` (qsub -w e,
MSG_JOB_NOSUITABLEQ_S of verify_suitable_queues()).

Sources: hostgroup(5), access_list(5), project(5), qsub(1) -P and -w, Grid Engine 6.2u5
MSG_HGROUP_CYCLEINDEF_SS, MSG_HGROUP_REFINHGOUP_SS, MSG_HGROUP_NOTEXIST_S,
MSG_HGRP_INVALIDHOSTGROUPNAME_S (source/daemons/qmaster/msg_qmaster.h,
source/libs/sgeobj/msg_sgeobjlib.h)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.http_api import assert_problem, define_license, submit


def _worker(client: TestClient, admin: dict[str, str], name: str) -> dict[str, str]:
    body = {"name": name, "queues": [{"name": "all.q", "slots": 2}]}
    response = client.post("/v1/workers", json=body, headers=admin)
    assert response.status_code in (200, 201), response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def test_host_groups_create_nest_show_replace_delete(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    admin = admin_headers
    linux = client.post(
        "/v1/hostgroups", json={"name": "@linux", "members": ["h1", "H2"]}, headers=admin
    )
    assert linux.status_code == 201, linux.text
    assert linux.json() == {"name": "@linux", "members": ["h1", "H2"], "hosts": ["h1", "h2"]}
    whole = client.post(
        "/v1/hostgroups", json={"name": "@every", "members": ["@linux", "h3"]}, headers=admin
    )
    assert whole.json()["hosts"] == ["h1", "h2", "h3"]
    listed = client.get("/v1/hostgroups", headers=admin).json()
    assert [item["name"] for item in listed["items"]] == ["@every", "@linux"]
    assert client.get("/v1/hostgroups/@every", headers=admin).json()["members"] == ["@linux", "h3"]
    # A change to a sub-group counts for every group holding it.
    replaced = client.put("/v1/hostgroups/@linux", json={"members": ["h4"]}, headers=admin)
    assert replaced.json()["hosts"] == ["h4"]
    assert client.get("/v1/hostgroups/@every", headers=admin).json()["hosts"] == ["h3", "h4"]
    taken = client.post("/v1/hostgroups", json={"name": "@every", "members": []}, headers=admin)
    assert assert_problem(taken, 409)["detail"] == 'host group "@every" already exists'
    held = client.delete("/v1/hostgroups/@linux", headers=admin)
    assert assert_problem(held, 409)["detail"] == (
        'denied: following hostgroups still reference "@linux": @every'
    )
    assert client.delete("/v1/hostgroups/@every", headers=admin).status_code == 204
    assert client.delete("/v1/hostgroups/@linux", headers=admin).status_code == 204
    missing = client.get("/v1/hostgroups/@linux", headers=admin)
    assert assert_problem(missing, 404)["detail"] == 'Host group "@linux" does not exist'


def test_bad_host_groups_are_422_naming_the_notation_and_nothing_is_stored(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    admin = admin_headers
    bad_name = client.post("/v1/hostgroups", json={"name": "linux", "members": []}, headers=admin)
    (error,) = assert_problem(bad_name, 422)["errors"]
    assert (error["field"], error["notation"], error["message"]) == (
        "body.name",
        "hostgroup(5)",
        'host group name "linux" is not valid',
    )
    bad_host = client.post(
        "/v1/hostgroups", json={"name": "@a", "members": ["h1", "h 2"]}, headers=admin
    )
    (error,) = assert_problem(bad_host, 422)["errors"]
    assert (error["field"], error["position"]) == ("body.members", 1)
    unknown = client.post(
        "/v1/hostgroups", json={"name": "@a", "members": ["@nosuch"]}, headers=admin
    )
    assert assert_problem(unknown, 422)["errors"][0]["message"] == (
        'Host group "@nosuch" does not exist'
    )
    assert (
        client.post(
            "/v1/hostgroups", json={"name": "@a", "members": ["h1"]}, headers=admin
        ).status_code
        == 201
    )
    assert (
        client.post(
            "/v1/hostgroups", json={"name": "@b", "members": ["@a"]}, headers=admin
        ).status_code
        == 201
    )
    cycle = client.put("/v1/hostgroups/@a", json={"members": ["@b"]}, headers=admin)
    (error,) = assert_problem(cycle, 422)["errors"]
    assert error["message"] == 'Hostgroup "@a" in specification of "@b" would create a cycle'
    # The refused change left the group as it was.
    assert client.get("/v1/hostgroups/@a", headers=admin).json()["members"] == ["h1"]


def test_access_lists_and_projects(client: TestClient, admin_headers: dict[str, str]) -> None:
    admin = admin_headers
    staff = client.post(
        "/v1/access-lists", json={"name": "staff", "members": ["alice", "bob"]}, headers=admin
    )
    assert staff.status_code == 201 and staff.json()["members"] == ["alice", "bob"]
    changed = client.put("/v1/access-lists/staff", json={"members": ["carol"]}, headers=admin)
    assert changed.json() == {"name": "staff", "members": ["carol"]}
    group = client.post(
        "/v1/access-lists", json={"name": "x", "members": ["@users"]}, headers=admin
    )
    (error,) = assert_problem(group, 422)["errors"]
    assert (error["notation"], error["field"]) == ("access_list(5)", "body.members")
    assert [i["name"] for i in client.get("/v1/access-lists", headers=admin).json()["items"]] == [
        "staff"
    ]
    assert client.delete("/v1/access-lists/staff", headers=admin).status_code == 204
    assert client.post("/v1/projects", json={"name": "p1"}, headers=admin).status_code == 201
    again = client.post("/v1/projects", json={"name": "p1"}, headers=admin)
    assert assert_problem(again, 409)["detail"] == "project 'p1' already exists"
    bad = client.post("/v1/projects", json={"name": "p 1"}, headers=admin)
    assert assert_problem(bad, 422)["errors"][0]["notation"] == "project(5)"
    assert client.get("/v1/projects/p1", headers=admin).json() == {"name": "p1"}
    assert [i["name"] for i in client.get("/v1/projects", headers=admin).json()["items"]] == ["p1"]


def test_a_job_names_an_existing_project_only(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    admin = admin_headers
    unknown = client.post("/v1/jobs", json={"hard": "h_rt=60", "project": "p1"}, headers=admin)
    (error,) = assert_problem(unknown, 422)["errors"]
    assert (error["field"], error["message"]) == (
        "body.project",
        'job rejected: the requested project "p1" does not exist',
    )
    assert client.get("/v1/jobs", headers=admin).json()["items"] == []
    client.post("/v1/projects", json={"name": "p1"}, headers=admin)
    job = submit(client, admin, hard="h_rt=60", project="p1")
    assert job["project"] == "p1"
    assert client.get(f"/v1/jobs/{job['id']}", headers=admin).json()["project"] == "p1"
    # A deleted project stays on the jobs that named it; new jobs may not name it.
    assert client.delete("/v1/projects/p1", headers=admin).status_code == 204
    assert client.get(f"/v1/jobs/{job['id']}", headers=admin).json()["project"] == "p1"
    again = client.post("/v1/jobs", json={"project": "p1"}, headers=admin)
    assert assert_problem(again, 422)["errors"][0]["field"] == "body.project"


def test_verify_e_refuses_what_could_run_nowhere_and_w_n_accept_it(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    admin = admin_headers
    define_license(client, admin)
    _worker(client, admin, "h1")
    client.put("/v1/values/global", json={"complex_values": {"lic": "2"}}, headers=admin)
    refused = client.post("/v1/jobs", json={"hard": "lic=3", "verify": "e"}, headers=admin)
    (error,) = assert_problem(refused, 422)["errors"]
    assert (error["field"], error["message"]) == ("body.verify", "error: no suitable queues")
    assert client.get("/v1/jobs", headers=admin).json()["items"] == []
    bad = client.post("/v1/jobs", json={"verify": "v"}, headers=admin)
    assert assert_problem(bad, 422)["errors"][0]["field"] == "body.verify"
    for level in ("w", "n"):
        assert submit(client, admin, hard="lic=3", verify=level)["state"] == "waiting"
    assert submit(client, admin, hard="lic=2", verify="e")["state"] == "waiting"


def test_a_host_group_queue_list_in_a_pull_a_run_and_explain(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    admin = admin_headers
    h1 = _worker(client, admin, "h1")
    h2 = _worker(client, admin, "h2")
    client.post("/v1/hostgroups", json={"name": "@linux", "members": ["h2"]}, headers=admin)
    job = submit(client, admin, queue_list="all.q@@linux")
    explain = client.get(f"/v1/jobs/{job['id']}/explain", headers=admin).json()
    assert explain["scheduling_info"] == [
        'cannot run in queue "all.q@h1" because it is not contained in its hard queue list (-q)'
    ]
    assert client.post("/v1/workers/h1/pull", headers=h1).status_code == 204
    pulled = client.post("/v1/workers/h2/pull", headers=h2)
    assert pulled.status_code == 200 and pulled.json()["id"] == job["id"]
    # The group changes, the category does not: the next job goes where the group says.
    client.put("/v1/hostgroups/@linux", json={"members": ["h1"]}, headers=admin)
    second = submit(client, admin, queue_list="all.q@@linux")
    assert client.post("/v1/schedule", headers=admin).json()["dispatched"] == 1
    placed = client.get(f"/v1/jobs/{second['id']}", headers=admin).json()
    assert (placed["state"], placed["worker"]) == ("running", "h1")
