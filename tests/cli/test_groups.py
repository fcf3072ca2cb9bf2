"""`jobmatch hostgroups|acls|projects` against a live server (qconf -ahgrp/-shgrp/-mhgrp/
-dhgrp, -au/-su/-mu/-dul, -aprj/-sprj/-dprj; hostgroup(5), access_list(5), project(5)) and
`jobmatch jobs submit -P/-w` (qsub(1) -P and -w e)."""

from __future__ import annotations

from tests.cli.conftest import Jobmatch


def test_host_groups_add_show_replace_list_delete(jobmatch: Jobmatch) -> None:
    assert jobmatch("hostgroups", "add", "@linux", "h1", "h2").code == 0
    added = jobmatch("hostgroups", "add", "@every", "@linux", "h3")
    assert added.code == 0, added.stderr
    assert added.stdout.splitlines() == [
        "group_name @every",
        "hostlist @linux h3",
        "hosts h1 h2 h3",
    ]
    replaced = jobmatch("hostgroups", "replace", "@linux", "h4")
    assert replaced.stdout.splitlines()[2] == "hosts h4"
    assert jobmatch("hostgroups", "show", "@every", "-o", "json").json() == jobmatch.api(
        "GET", "/v1/hostgroups/@every"
    )
    listed = jobmatch("hostgroups", "list").stdout.splitlines()
    assert [line.split()[0] for line in listed[2:]] == ["@every", "@linux"]
    held = jobmatch("hostgroups", "delete", "@linux")
    assert held.code == 1 and 'still reference "@linux": @every' in held.stderr
    cycle = jobmatch("hostgroups", "replace", "@linux", "@every")
    assert cycle.code == 1 and "would create a cycle" in cycle.stderr
    assert jobmatch("hostgroups", "delete", "@every").stdout == "deleted host group @every\n"


def test_acls_and_projects_and_a_job_s_project_and_verify(jobmatch: Jobmatch) -> None:
    shown = jobmatch("acls", "add", "staff", "alice", "bob")
    assert shown.stdout.splitlines() == ["name    staff", "type    ACL", "entries alice,bob"]
    assert jobmatch("acls", "replace", "staff", "carol").stdout.splitlines()[2] == "entries carol"
    assert jobmatch("acls", "delete", "staff").stdout == "deleted access list staff\n"
    assert jobmatch("projects", "add", "p1").stdout == "name p1\n"
    assert jobmatch("projects", "list").stdout.splitlines()[2].split() == ["p1"]
    jobmatch.api("POST", "/v1/workers", {"name": "h1", "queues": [{"name": "all.q", "slots": 1}]})
    job = jobmatch("jobs", "submit", "--hard", "h_rt=60", "-P", "p1", "-w", "e", "-o", "json")
    assert job.code == 0, job.stderr
    assert job.json()["project"] == "p1"
    unknown = jobmatch("jobs", "submit", "-P", "p9")
    assert unknown.code == 1
    assert 'the requested project "p9" does not exist' in unknown.stderr
    # Two slots of a PE on a cluster of one slot: -w e refuses, without it the job waits.
    jobmatch.api("PUT", "/v1/pes/mpi", {"allocation_rule": "$fill_up"})
    nowhere = jobmatch("jobs", "submit", "--pe", "mpi", "--pe-slots", "2", "-w", "e")
    assert nowhere.code == 1 and "error: no suitable queues" in nowhere.stderr
    waits = jobmatch("jobs", "submit", "--pe", "mpi", "--pe-slots", "2", "-o", "json")
    assert waits.json()["state"] == "waiting"
    assert jobmatch("projects", "delete", "p1").stdout == "deleted project p1\n"
